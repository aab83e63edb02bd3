"""A workflow for the silent-connection tests of the runner (tests/ops/
test_runner_silent_connection_processes.py), loaded by the runner through WORKFLOWS_MODULES: its
second step, the first time it runs, waits for the test's go (a file) before it returns, so the
boundary write that follows is the next round trip on the connection that wrote the first
step's boundary."""

import threading
from pathlib import Path

from workflows import workflow


@workflow(name="liveness-silent-boundary")
def silent_boundary(event, step):
    folder = Path(event.payload["folder"])

    def stalled():
        if not (folder / "stalled").exists():
            (folder / "stalled").touch()
            while not (folder / "go").exists():
                threading.Event().wait(0.05)
        return 1

    zero = step.do("before", lambda: 0)
    one = step.do("stalled", stalled)
    two = step.do("after", lambda: 2)
    return zero + one + two
