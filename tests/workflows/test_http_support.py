"""Workflows and helpers shared by the HTTP, CLI and console tests (no tests here).

h5-approval: one step, then waits for an "approve" event and returns what it got.
h5-fail: fails at once with NonRetryableError.
h5-ver v1/v2: return their version, so a test can tell which one ran.
"""

import uuid

from workflows import NonRetryableError, workflow

READ, CREATE, MANAGE, EVENTS, TICK = (
    "workflows:read",
    "workflows:create",
    "workflows:manage",
    "workflows:events",
    "workflows:tick",
)
ALL_SCOPES = (READ, CREATE, MANAGE, EVENTS, TICK)


@workflow(name="h5-approval")
def approval(event, step):
    prepared = step.do("prepare", lambda: {"order": (event.payload or {}).get("order")})
    step.log.info("waiting for approval", {"order": prepared["order"]})
    got = step.wait_for_event("approval", type="approve", timeout="1 hour")
    return {"order": prepared["order"], "approved_by": (got["payload"] or {}).get("by")}


@workflow(name="h5-fail")
def failing(event, step):
    def boom():
        raise NonRetryableError("no way")

    return step.do("boom", boom)


@workflow(name="h5-ver", version=1)
def ver1(event, step):
    return step.do("which", lambda: "v1")


@workflow(name="h5-ver", version=2)
def ver2(event, step):
    return step.do("which", lambda: "v2")


def new_key() -> str:
    return uuid.uuid4().hex


def create(client, name="h5-approval", *, key=None, **body):
    """POST an instance with a fresh Idempotency-Key unless one is given."""
    return client.post(
        f"/v1/workflows/{name}/instances",
        body,
        format="json",
        HTTP_IDEMPOTENCY_KEY=key or new_key(),
    )


def instance_url(instance_id: str, suffix: str = "", name: str = "h5-approval") -> str:
    return f"/v1/workflows/{name}/instances/{instance_id}{suffix}"
