"""A real bucket that trickles: a local HTTP server (its own thread) that answers every GET with
200, a Content-Length it never reaches, and one byte every `interval` seconds until `total`
seconds have passed; it counts the requests it served. Used by the slow-bucket fault tests and
bench/slow_bucket.py."""

import socket
import threading
import time
from contextlib import contextmanager


@contextmanager
def trickling_bucket(*, interval: float = 0.5, total: float = 120.0):
    """Yields {"port", "requests"}; the server stops when the block ends."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    state = {"port": listener.getsockname()[1], "requests": 0}
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                state["requests"] += 1
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
                ends = time.monotonic() + total
                while not stop.is_set() and time.monotonic() < ends:
                    conn.sendall(b" ")
                    stop.wait(interval)
            except OSError:
                return

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        stop.set()
        listener.close()
        thread.join(timeout=2)
