"""Workflows for the limit tests: `limit-probe` makes one engine call described by its params,
so each test states the call and the value it tries; `limit-refused` writes what a database
may refuse (tests/workflows/test_limits_storage.py)."""

from datetime import UTC, datetime, timedelta

from workflows import workflow


@workflow(name="limit-probe")
def probe(event, step):
    # Params cannot hold NUL (the JSON rules refuse it at create): "<NUL>" stands for one.
    p = {
        k: v.replace("<NUL>", "\x00") if isinstance(v, str) else v for k, v in event.payload.items()
    }
    call = p["call"]
    if call == "log":
        step.log.info(p.get("message", "hello"), category=p.get("category", "workflow"))
    elif call == "sleep":
        step.sleep("nap", p["duration"])
    elif call == "sleep_until":
        step.sleep_until("nap", datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=p["days"]))
    elif call == "do":
        step.do(p.get("name", "work"), lambda: "done", **p.get("options", {}))
    elif call == "wait":
        step.wait_for_event("wait", type=p.get("type", "ping"), timeout=p["timeout"])
    elif call == "steps":
        for i in range(p["count"]):
            step.do(f"s{i}", lambda: None)
    return "ok"


@workflow(name="limit-refused")
def refused(event, step):
    """A step result, log or mutation the database may refuse: the storage backstop's case."""
    from ops.models import AuditLog

    p = event.payload
    step.do("before", lambda: "fine")
    if p.get("category"):
        step.log.info("categorised", category=p["category"])

    def write():
        if p.get("action"):
            step.tx.mutate(lambda: AuditLog.objects.create(action=p["action"], resource="x"))
        return "written"

    step.do("write", write)
    return "done"
