"""The `terra-deauthenticate` workflow: after a wipe, each of the wiped user's Terra connections is
deauthenticated at Terra (DELETE /v2/auth/deauthenticateUser) by a durable instance, so a Terra
outage delays it and never skips it.

Instance `user-<wiped user's id>`, created in the wipe's own transaction (ingest.actions), with
params {"user": id, "actor": who wiped, "connections": n, "terra_user_ids": [...]}:

1. one step per connection (`deauthenticate connection <i>`), retried without limit with
   exponential backoff capped at an hour while Terra is unreachable or answers 401/403/429/5xx;
   a 404 means Terra no longer knew the user (`not_found`), any other 4xx is recorded as
   `refused:<status>` (retrying cannot change it);
2. `finish`: in that step's transaction, the Terra user ids leave the params (the only place
   they were stored: step names, results, errors and logs never hold them) and the
   `terra_connection.deauthenticate` audit row is written with the counts.

A finished instance keeps only counts: nothing in it names the user at Terra any more. While it
waits out an outage the ids are in its params, and nowhere else.
"""

import math

from django.db import transaction

from ingest.connections import TerraDeauthRetryable, terra_user_deauthenticate
from ingest.terra.client import TerraError
from ops.services import audit_log_write
from workflows import services as workflow_services
from workflows import workflow
from workflows.userdata import instance_params_forget

WORKFLOW = "terra-deauthenticate"
IDS = "terra_user_ids"
RETRIES = {
    "limit": math.inf,
    "delay": "30 seconds",
    "backoff": "exponential",
    "max_delay": "1 hour",
}
# Terra's 401/403 say our credentials are wrong: an operator fixes them and the retries get
# through. Other 4xx (a malformed id) cannot get better.
RETRYABLE_REFUSALS = (401, 403)
HIDDEN = "[terra user id]"


def terra_deauthenticate_start(*, terra_user_ids: list[str], user_pk: int, actor: str) -> str:
    """Create the instance for a wipe, in the caller's transaction: the wipe commits with it or
    not at all. Returns its instance id."""
    ids = sorted(set(terra_user_ids))
    with transaction.atomic():
        instance = workflow_services.instance_create(
            workflow_name=WORKFLOW,
            instance_id=f"user-{user_pk}",
            params={"user": user_pk, "actor": actor, "connections": len(ids), IDS: ids},
        )
    return instance.instance_id


def _deauthenticate(terra_user_ids: list[str] | None, index: int) -> str:
    if not terra_user_ids:  # a restart of a finished instance: the ids are gone, nothing to do
        return "forgotten"
    terra_user_id = terra_user_ids[index]
    try:
        return terra_user_deauthenticate(terra_user_id=terra_user_id)
    except TerraDeauthRetryable as exc:
        # Stored as the step's error and logged: without the id.
        raise TerraDeauthRetryable(str(exc).replace(terra_user_id, HIDDEN)) from None
    except TerraError as exc:
        if exc.status in RETRYABLE_REFUSALS:
            raise TerraDeauthRetryable(f"Terra answered {exc.status}") from None
        return f"refused:{exc.status}"


def _finish(step, instance_id: str, params: dict, counts: dict) -> dict:
    step.tx.mutate(lambda: instance_params_forget(WORKFLOW, instance_id, keys=(IDS,)))
    step.tx.mutate(
        lambda: audit_log_write(
            action="terra_connection.deauthenticate",
            resource=f"user:{params.get('user')}",
            result="ok" if set(counts) <= {"deauthenticated", "not_found"} else "partial",
            actor=params.get("actor") or "system",
            subject=params.get("user"),
            metadata=counts,
        )
    )
    return counts


@workflow(name=WORKFLOW)
def terra_deauthenticate(event, step):
    params = event.payload or {}
    ids = params.get(IDS)
    outcomes = [
        step.do(
            f"deauthenticate connection {index + 1}",
            lambda index=index: _deauthenticate(ids, index),
            retries=RETRIES,
            timeout="2 minutes",
        )
        # The count, not the ids: a replay after `finish` (ids gone) walks the same steps.
        for index in range(int(params.get("connections") or 0))
    ]
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome] = counts.get(outcome, 0) + 1
    return step.do("finish", lambda: _finish(step, event.instance_id, params, counts))
