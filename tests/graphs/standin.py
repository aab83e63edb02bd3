"""A stand-in for a clinic's webhook: a real HTTP server on a loopback port (not a mock
transport) that answers from a script and records every call — when it came, its
Idempotency-Key and its body — so tests can count calls and keys.

    with StandIn([answer(429, retry_after="2"), answer(200, {"ok": True})]) as clinic:
        ...  # the http action posts to clinic.url
        assert [c.key for c in clinic.calls] == [key, key]

Each call takes the next answer of the script (the last one repeats). `answer(..., delay=s)`
sleeps before answering (a client with a shorter timeout gives up first)."""

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Answer:
    status: int = 200
    body: object = None
    headers: dict = field(default_factory=dict)
    delay: float = 0.0


def answer(status=200, body=None, *, retry_after: str | None = None, delay: float = 0.0) -> Answer:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Answer(status, body, headers, delay)


@dataclass
class Call:
    at: float  # time.monotonic() when it arrived
    method: str
    path: str
    key: str | None
    body: bytes


class StandIn:
    def __init__(self, script: list[Answer]):
        self.script = list(script)
        self.calls: list[Call] = []
        self.lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                stand_in.handle(self)

            do_GET = do_PUT = do_DELETE = do_POST  # noqa: N815

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        self.url = f"http://{self.host}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        with self.lock:
            self.calls.append(
                Call(
                    time.monotonic(),
                    request.command,
                    request.path,
                    request.headers.get("Idempotency-Key"),
                    body,
                )
            )
            reply = self.script[min(len(self.calls), len(self.script)) - 1]
        if reply.delay:
            time.sleep(reply.delay)
        payload = b"" if reply.body is None else json.dumps(reply.body).encode()
        try:
            request.send_response(reply.status)
            for name, value in reply.headers.items():
                request.send_header(name, value)
            request.send_header("Content-Type", "application/json")
            request.send_header("Content-Length", str(len(payload)))
            request.end_headers()
            request.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout) before the answer

    @property
    def keys(self) -> list[str | None]:
        return [c.key for c in self.calls]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
