"""Helpers for tests that run `make run`'s process set as a user would: a free port, the
terminal it prints to, polling with a deadline, and its logins file."""

import contextlib
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Terminal:
    """What the user's terminal shows: the process's stdout and stderr, line by line."""

    def __init__(self, proc: subprocess.Popen):
        self.lines: list[str] = []
        for stream in (proc.stdout, proc.stderr):
            threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def wait_for(what: str, check, *, timeout: float):
    """check()'s first truthy answer, polled every second; fails saying what never came."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if answer := check():
            return answer
        time.sleep(1)
    pytest.fail(f"not seen within {timeout:.0f} s: {what}")


@contextlib.contextmanager
def running(argv: list, *, cwd: Path, env: dict) -> Iterator[Terminal]:
    """`argv` running (rundemo), as its terminal; stopped with Ctrl-C (SIGINT) on the way out."""
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        yield Terminal(proc)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def read_logins(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
