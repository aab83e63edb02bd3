"""One box, several long-running processes (`manage.py serve`, `make run`): bind the web port
first (refuse clearly when it is taken), start the children, restart one that exits with a
growing backoff, forward SIGTERM/SIGINT (stop) and SIGHUP (reload web), stop them all on exit.

The listening socket is bound here and handed to gunicorn as `fd://N`, so the port stays ours
while gunicorn restarts (connections wait in the backlog) and nothing else can take it between
the check and the start."""

import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

BACKOFF_FIRST, BACKOFF_MAX = 1.0, 60.0
STABLE_AFTER = 60.0  # a child that ran this long before exiting starts over at the first delay
GRACE_SECONDS = 30.0


class PortInUse(Exception):
    pass


def bind_listener(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, inheritable by a child; PortInUse when it is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    # REUSEADDR only skips TIME_WAIT leftovers; a live listener still refuses the bind.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            raise PortInUse(
                f"port {port} on {host} is already in use (is vitalflow already running?). "
                "Stop the other server or choose another port: --port N or PORT=N."
            ) from None
        raise
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def manage(*args: str) -> list[str]:
    """argv of a management command in a child, for a checkout and an installed wheel alike."""
    return [sys.executable, "-m", "config.manage", *args]


def gunicorn(
    sock: socket.socket, *, workers: int, extra: tuple[str, ...] = (), quiet: bool = False
) -> list[str]:
    """gunicorn's argv; `quiet`: no access log, warnings and errors only (`make run`)."""
    logs = ("--log-level", "warning") if quiet else ("--access-logfile", "-")
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "config.wsgi:application",
        "--bind",
        f"fd://{sock.fileno()}",
        "--workers",
        str(workers),
        *logs,
        "--config",
        "python:config.gunicorn_conf",
        *extra,
    ]


def default_web_workers() -> int:
    """gunicorn's WEB_CONCURRENCY if set, else cores + 1 sync workers (README: measured)."""
    raw = os.environ.get("WEB_CONCURRENCY", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else (os.cpu_count() or 1) + 1


@dataclass
class Child:
    name: str
    argv: list[str]
    pass_fds: tuple[int, ...] = ()
    reload_on_hup: bool = False
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    failures: int = 0
    restart_at: float = 0.0
    restarts: int = 0


@dataclass
class Supervisor:
    children: list[Child]
    log: object = print  # one line per lifecycle event
    stopping: bool = False
    exit_code: int = 0
    _signals: list[int] = field(default_factory=list)

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, frame) -> None:
        self._signals.append(signum)  # acted on in poll(), outside the handler

    def start(self) -> None:
        for child in self.children:
            self._spawn(child)

    def run(self) -> int:
        """Supervise until SIGTERM/SIGINT, then stop everything; the exit code."""
        self.install_signal_handlers()
        self.start()
        try:
            while not self.stopping:
                self.poll()
                time.sleep(0.2)
        finally:
            self.stop_all()
        return self.exit_code

    def poll(self) -> None:
        """One supervision pass: handle signals, notice exits, restart what is due."""
        while self._signals:
            signum = self._signals.pop(0)
            if signum == signal.SIGHUP:
                for child in self.children:
                    if child.reload_on_hup and child.proc and child.proc.poll() is None:
                        child.proc.send_signal(signal.SIGHUP)
                        self.log(f"{child.name}: reload (SIGHUP forwarded)")
            else:
                self.log(f"{signal.Signals(signum).name}: stopping")
                self.stopping = True
                return
        now = time.monotonic()
        for child in self.children:
            if child.proc is not None and child.proc.poll() is not None:
                self._exited(child, now)
            elif child.proc is None and now >= child.restart_at:
                child.restarts += 1
                self._spawn(child)

    def alive(self, name: str) -> bool:
        child = next(c for c in self.children if c.name == name)
        return child.proc is not None and child.proc.poll() is None

    def _spawn(self, child: Child) -> None:
        # Its own process group: a crashed child's orphans (a qcluster's workers) go with it,
        # and a terminal's Ctrl-C reaches only the supervisor, which stops children in order.
        child.proc = subprocess.Popen(child.argv, pass_fds=child.pass_fds, start_new_session=True)
        child.started_at = time.monotonic()
        self.log(f"{child.name}: started (pid {child.proc.pid})")

    def _exited(self, child: Child, now: float) -> None:
        code, ran = child.proc.returncode, now - child.started_at
        _signal_group(child.proc, signal.SIGKILL)  # whatever it left behind
        child.failures = 0 if ran >= STABLE_AFTER else child.failures + 1
        delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** max(child.failures - 1, 0))
        self.log(
            f"{child.name}: pid {child.proc.pid} exited with {code} after {ran:.1f} s; "
            f"restarting in {delay:.0f} s"
        )
        child.proc, child.restart_at = None, now + delay

    def stop_all(self, grace: float = GRACE_SECONDS) -> None:
        live = [c for c in self.children if c.proc is not None and c.proc.poll() is None]
        for child in live:
            child.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for child in live:
            try:
                child.proc.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                self.log(f"{child.name}: did not stop within {grace:.0f} s; killed")
                child.proc.kill()
                child.proc.wait()
        for child in self.children:
            if child.proc is not None:
                _signal_group(child.proc, signal.SIGKILL)
        self.log("stopped")


def _signal_group(proc: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
        os.killpg(proc.pid, signum)
