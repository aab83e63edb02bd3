"""A workflow for the silent-connection tests of the runner (tests/ops/
test_runner_silent_connection_processes.py), loaded by the runner through WORKFLOWS_MODULES: its
first step, the first time it runs, waits for the test's go (a file) before it returns, so the
boundary write that follows is the runner's next round trip."""

import threading
from pathlib import Path

from workflows import workflow


@workflow(name="liveness-silent-boundary")
def silent_boundary(event, step):
    folder = Path(event.payload["folder"])

    def first():
        if not (folder / "stalled").exists():
            (folder / "stalled").touch()
            while not (folder / "go").exists():
                threading.Event().wait(0.05)
        return 1

    one = step.do("first", first)
    two = step.do("second", lambda: 2)
    return one + two
