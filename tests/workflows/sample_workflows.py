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


@workflow(name="nap-and-event")
def nap_and_event(event, step):
    """Sleeps 2 s, then waits for a "go" event (an idle runner must be woken for both)."""
    step.sleep("nap", "2 seconds")
    got = step.wait_for_event("go", type="go", timeout="1 hour")
    return got["payload"]


# Wake latency (bench/workflows.py --only makerun): each returns the wall time its woken code
# ran; the bench compares it with the stored due time (or the event's send time).


@workflow(name="wake-sleep")
def wake_sleep(event, step):
    step.sleep("nap", (event.payload or {}).get("ms", 2000))
    return step.do("woke", time.time)


@workflow(name="wake-retry")
def wake_retry(event, step):
    """The first attempt fails, writing its wall time to params["marker"]; the retry is due
    1 s later and returns the time it ran."""
    marker = event.payload["marker"]

    def flaky():
        if not os.path.exists(marker):
            with open(marker, "w") as f:
                f.write(repr(time.time()))
            raise RuntimeError("first attempt fails")
        return time.time()

    retries = {"limit": 1, "delay": "1 second", "backoff": "constant"}
    return step.do("flaky", flaky, retries=retries)


@workflow(name="wake-timeout")
def wake_timeout(event, step):
    from workflows import WaitForEventTimeout

    try:
        step.wait_for_event("never", type="never", timeout=(event.payload or {}).get("ms", 2000))
    except WaitForEventTimeout:
        return step.do("woke", time.time)
    return None


@workflow(name="wake-event")
def wake_event(event, step):
    step.wait_for_event("go", type="go", timeout="1 hour")
    return step.do("woke", time.time)
