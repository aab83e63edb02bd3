"""Workflows with a retention for the GC tests. The `retention_fleet` fixture
(tests/workflows/conftest.py) registers them for one test and removes them again."""

from workflows import NonRetryableError, workflow

NAMES = ("gc-kept", "gc-default")


def _body(event, step):
    params = event.payload or {}
    step.do("one", lambda: 1)
    step.log.info("did one", {"n": 1})
    if params.get("fail"):
        step.do("boom", _fail)
    if params.get("wait"):
        step.wait_for_event("go", type="go", timeout="365 days")
    return step.do("two", lambda: 2)


def _fail():
    raise NonRetryableError("asked to fail")


@workflow(name="gc-kept", retention={"complete": "30 days", "errored": "90 days"})
def kept(event, step):
    return _body(event, step)


@workflow(name="gc-default")  # no retention of its own: the project default applies
def default(event, step):
    return _body(event, step)
