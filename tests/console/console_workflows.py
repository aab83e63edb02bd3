"""Workflows the console tests drive: one that retries and fails (a traceback to show), one that
sleeps then waits for a person's event, one with many steps (a long waterfall)."""

from workflows import workflow


class LabTimeout(Exception):
    pass


def _fetch_marker(secret_value):
    # The secret is a local variable: the stored traceback must never show it.
    raise LabTimeout("clinic did not answer")


@workflow(name="console-flaky")
def flaky(event, step):
    step.do("prepare", lambda: {"ok": True})
    return step.do(
        "call clinic",
        lambda: _fetch_marker(event.payload.get("reading")),
        retries={"limit": 2, "delay": "10 seconds", "backoff": "constant"},
    )


@workflow(name="console-approval")
def approval(event, step):
    step.do("collect", lambda: {"markers": 3})
    step.sleep("let the lab settle", "1 minute")
    answer = step.wait_for_event("doctor approves", type="approved", timeout="1 hour")
    return step.do("store", lambda: {"approved_by": answer.payload["by"]})


@workflow(name="console-many")
def many(event, step):
    for i in range(int(event.payload.get("steps", 10))):
        step.do(f"item {i}", lambda i=i: i)
    return "done"
