"""Capped workflows for the concurrency tests. Importing registers them: runner
subprocesses load this module through WORKFLOWS_MODULES; in the test process the `fleet`
fixture (tests/workflows/conftest.py) registers them for one test and removes them again, so
the other tests keep running on an uncapped deployment.

Each step callback appends "<instance> start|end <monotonic ns> <pid>" to params["trace"], so a
test can count how many ran at once across processes."""

import os
import time

from workflows import workflow

NAMES = ("fleet-capped", "fleet-per-user", "fleet-capped-sleeper")


def _trace(path, line: str) -> None:
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


def _work(event, step, name: str) -> int:
    params = event.payload or {}

    def run():
        trace = params.get("trace")
        _trace(trace, f"{event.instance_id} start {time.monotonic_ns()} {os.getpid()}")
        time.sleep(params.get("sleep_ms", 0) / 1000)
        _trace(trace, f"{event.instance_id} end {time.monotonic_ns()} {os.getpid()}")
        return 1

    return step.do(name, run)


@workflow(name="fleet-capped", concurrency=2)
def capped(event, step):
    _work(event, step, "one")
    return _work(event, step, "two")


@workflow(name="fleet-per-user", concurrency=1, concurrency_key="user")
def per_user(event, step):
    return _work(event, step, "one")


@workflow(name="fleet-capped-sleeper", concurrency=1)
def capped_sleeper(event, step):
    step.do("before", lambda: 1)
    step.sleep("nap", "1 hour")
    return step.do("after", lambda: 2)
