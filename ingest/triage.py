"""Operator state changes on raw events that the console, the operator API and the commands share:
mark skipped, and the operator's drain. (Replay is the spine's raw_events_replay.)"""

import logging

from django.db import transaction
from django.utils import timezone

from ingest.drain import raw_events_drain
from ingest.models import RawEvent, RawEventState
from ingest.traces import trace_write
from ops.services import SYSTEM_ACTOR, audit_log_write

log = logging.getLogger(__name__)

# Rows an operator may acknowledge by hand: anything not finished.
SKIPPABLE_STATES = (
    RawEventState.PENDING,
    RawEventState.PARKED,
    RawEventState.RETRYING,
    RawEventState.DEAD,
)


def raw_events_mark_skipped(
    *, ids: list[int], reason: str, request=None, actor: str | None = None
) -> int:
    """Acknowledge unfinished rows without storing them: state skipped, process_error
    `skipped:manual:<reason>`. Finished rows are left as they are; returns how many changed."""
    reason = " ".join(reason.split())[:200] or "operator"
    now = timezone.now()
    with transaction.atomic():
        # Compare-and-set on state: a consumer finishing a row meanwhile wins.
        changed_ids = list(
            RawEvent.objects.filter(pk__in=ids, state__in=SKIPPABLE_STATES).values_list(
                "id", flat=True
            )
        )
        changed = RawEvent.objects.filter(pk__in=changed_ids, state__in=SKIPPABLE_STATES).update(
            state=RawEventState.SKIPPED,
            processed_at=now,
            process_error=f"skipped:manual:{reason}",
            next_attempt_at=None,
        )
        audit_log_write(
            action="raw_events.mark_skipped",
            resource="raw_events:" + ",".join(str(i) for i in changed_ids[:50]),
            request=request,
            actor=actor,
            metadata={"requested": len(ids), "changed": changed, "reason": reason},
        )
    for raw_event_id in changed_ids:
        trace_write("skipped", raw_event_id=raw_event_id, data={"manual": True, "reason": reason})
    return changed


def raw_events_drain_request(
    *,
    limit: int = 50,
    include_skipped: bool = False,
    include_no_connection: bool = False,
    request=None,
    actor: str | None = None,
) -> dict:
    """An operator's drain (API, console, command): the spine's drain, which writes the audit
    row, plus a drain_run trace the dashboard reads as "last drain"."""
    result = raw_events_drain(
        limit=limit,
        include_skipped=include_skipped,
        include_no_connection=include_no_connection,
        request=request,
        actor=actor or (None if request is not None else SYSTEM_ACTOR),
    ).as_dict()
    trace_write(
        "drain_run",
        data={k: v for k, v in result.items() if k != "ids"} | {"source": "operator"},
    )
    return result
