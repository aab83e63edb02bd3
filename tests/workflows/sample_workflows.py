"""Small workflows for the engine's tests and bench (loaded via WORKFLOWS_MODULES in runner
subprocesses, imported by tests/workflows/conftest.py in the test process).

Side effects go to a file named in params["trace"] (one line per callback execution), so tests can
count executions across processes that were killed."""

import os
import time

from workflows import workflow


def _trace(path: str | None, line: str) -> None:
    if path:
        # O_APPEND writes of one short line are atomic enough for counting across processes.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


@workflow(name="sample-steps")
def sample_steps(event, step):
    """params: {"steps": N, "sleep_ms": {"<index>": ms} or int, "trace": path}"""
    params = event.payload or {}
    total = params.get("steps", 3)
    delays = params.get("sleep_ms", 0)
    results = []
    for i in range(1, total + 1):

        def run(i=i):
            _trace(params.get("trace"), f"{event.instance_id} step-{i} {os.getpid()}")
            delay = delays.get(str(i), 0) if isinstance(delays, dict) else delays
            if delay:
                time.sleep(delay / 1000)
            return i

        results.append(step.do(f"step-{i}", run))
    return results


@workflow(name="noop3")
def noop3(event, step):
    """The bench's sequential 3-step no-op workflow."""
    step.do("a", lambda: 1)
    step.do("b", lambda: 2)
    return step.do("c", lambda: 3)


@workflow(name="sleepy")
def sleepy(event, step):
    """Sleeps 1 s, then returns the wall time it woke at (bench wake latency)."""
    step.sleep("nap", "1 second")
    return step.do("woke", time.time)


@workflow(name="hostile-result")
def hostile_result(event, step):
    """A step whose result is a lone surrogate: not storable JSON."""
    return step.do("bad", lambda: "\ud800")
