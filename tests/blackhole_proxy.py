"""A TCP proxy for fault tests that can go silent: it forwards 127.0.0.1:<port> to an upstream
until told to blackhole, then stops forwarding both ways without closing anything (the peers'
kernels still acknowledge every byte, as a middlebox that lost its upstream or a frozen server
would), and resumes on heal(), as a partition that ends. One selector thread; a test owns one.

    with BlackholeProxy("127.0.0.1", 5432) as proxy:
        ...connect to 127.0.0.1:proxy.port...
        proxy.blackhole(lambda link: link.upstream_port == backend_client_port, new=True)
        ...
        proxy.heal()
"""

import contextlib
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

CHUNK = 65536
DROPPED_WITHIN = 60  # the promise: a silent connection is dropped within this (default bounds)
WAIT_SECONDS = 120  # a bound for a stuck test, not a figure


@dataclass(eq=False)
class Link:
    """One client connection and its upstream one. `upstream_port` is the proxy's local port
    towards the upstream: what PostgreSQL's pg_stat_activity.client_port shows."""

    client: socket.socket
    upstream: socket.socket | None = None
    upstream_port: int | None = None
    silent: bool = False
    opened_at: float = field(default_factory=time.monotonic)
    silenced_at: float | None = None
    held_since: float | None = None  # the client's first byte that the silence held
    client_closed_at: float | None = None  # the client shut its side down (FIN or RST)
    to_upstream: bytearray = field(default_factory=bytearray)
    to_client: bytearray = field(default_factory=bytearray)
    upstream_closed: bool = False

    @property
    def closed_by_client(self) -> bool:
        return self.client_closed_at is not None


class BlackholeProxy:
    def __init__(self, upstream_host: str, upstream_port: int):
        self.upstream = (upstream_host, int(upstream_port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.links: list[Link] = []
        self._new_silent = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._thread = threading.Thread(target=self._run, name="blackhole-proxy", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.close()

    # -- what tests call ------------------------------------------------------------------------

    def blackhole(self, match: Callable[[Link], bool] | None = None, *, new: bool = False) -> int:
        """Stop forwarding the links `match` picks (all open ones when None); with new=True,
        connections made from now on are accepted and held, never forwarded (a client's
        connect_timeout ends them). Returns how many open links went silent."""
        now = time.monotonic()
        with self._lock:
            self._new_silent = new
            picked = [
                link
                for link in self.links
                if not link.closed_by_client and (match is None or match(link))
            ]
            for link in picked:
                link.silent, link.silenced_at = True, now
        return len(picked)

    def heal(self) -> None:
        """Forward everything again: held bytes flow on, held new connections reach upstream."""
        with self._lock:
            self._new_silent = False
            for link in self.links:
                link.silent, link.held_since = False, None

    def silenced(self) -> list[Link]:
        with self._lock:
            return [link for link in self.links if link.silenced_at is not None]

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        for link in self.links:
            for sock in (link.client, link.upstream):
                if sock is not None:
                    sock.close()
        self.listener.close()
        self._selector.close()

    # -- the forwarding loop --------------------------------------------------------------------

    def _run(self) -> None:
        self._selector.register(self.listener, selectors.EVENT_READ, None)
        while not self._stop.is_set():
            with self._lock:
                for link in self.links:
                    self._connect_if_due(link)
                    self._flush(link)
                    self._watch(link)
            for key, _ in self._selector.select(timeout=0.02):
                if key.data is None:
                    self._accept()
                else:
                    link, side = key.data
                    with self._lock:
                        self._read(link, side)

    def _accept(self) -> None:
        try:
            client, _ = self.listener.accept()
        except BlockingIOError:
            return
        client.setblocking(False)
        with self._lock:
            link = Link(client=client, silent=self._new_silent)
            if link.silent:
                link.silenced_at = time.monotonic()
            self.links.append(link)

    def _connect_if_due(self, link: Link) -> None:
        if link.upstream is not None or link.silent or link.closed_by_client:
            return
        upstream = socket.create_connection(self.upstream, timeout=5)
        upstream.setblocking(False)
        link.upstream, link.upstream_port = upstream, upstream.getsockname()[1]

    def _watch(self, link: Link) -> None:
        """Register the link's open sockets for reading (silent links are read too, into their
        buffers: a client that gives up must be seen closing even while nothing is forwarded)."""
        for side, sock, done in (
            ("client", link.client, link.closed_by_client),
            ("upstream", link.upstream, link.upstream_closed),
        ):
            if sock is None or sock.fileno() < 0:
                continue
            registered = sock in {key.fileobj for key in self._selector.get_map().values()}
            if done and registered:
                self._selector.unregister(sock)
            elif not done and not registered:
                self._selector.register(sock, selectors.EVENT_READ, (link, side))

    def _read(self, link: Link, side: str) -> None:
        sock = link.client if side == "client" else link.upstream
        try:
            data = sock.recv(CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            if side == "client" and link.silent and link.held_since is None:
                link.held_since = time.monotonic()
            (link.to_upstream if side == "client" else link.to_client).extend(data)
        elif side == "client":
            link.client_closed_at = time.monotonic()
            self._selector.unregister(sock)
        else:
            link.upstream_closed = True
            self._selector.unregister(sock)

    def _flush(self, link: Link) -> None:
        if link.silent:
            return
        for buffer, sock in ((link.to_upstream, link.upstream), (link.to_client, link.client)):
            if buffer and sock is not None:
                try:
                    sent = sock.send(buffer)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    buffer.clear()
                    continue
                del buffer[:sent]
        # A side that closed closes the other once what it sent has been passed on.
        if link.closed_by_client and not link.to_upstream and link.upstream is not None:
            _shut(link.upstream)
        if link.upstream_closed and not link.to_client:
            _shut(link.client)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


# -- helpers of the PostgreSQL process tests ------------------------------------------------------


def to_the_test_database() -> BlackholeProxy:
    """A proxy to the server of the test database (use it as a context manager)."""
    from django.db import connection

    s = connection.settings_dict
    return BlackholeProxy(s["HOST"] or "127.0.0.1", s["PORT"] or 5432)


def proxied_database_url(proxy: BlackholeProxy) -> str:
    """DATABASE_URL of the test database, through the proxy."""
    from django.db import connection

    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{auth}@127.0.0.1:{proxy.port}/{s['NAME']}"


TERMINATE = b"X\x00\x00\x00\x04"  # PostgreSQL's Terminate message: a client's clean close


def dropped_mid_statement(proxy: BlackholeProxy) -> list[Link]:
    """Links open before the silence (connected upstream) that their client shut down while a
    statement it sent was held, without the Terminate of a clean close. A connection attempt
    made during the silence (held, never connected upstream) that its client gave up on
    (connect_timeout) is not one."""
    return [
        link
        for link in proxy.silenced()
        if link.upstream is not None
        and link.closed_by_client
        and link.held_since is not None
        and not bytes(link.to_upstream).endswith(TERMINATE)
    ]


def wait_until(what: str, predicate, seconds: float = WAIT_SECONDS):
    """predicate()'s first true answer, polled every 0.2 s; AssertionError after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {seconds} s")
