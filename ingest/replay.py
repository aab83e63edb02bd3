"""Replays: give raw events another go from pending (an operator's replay, or a connection that
now exists for rows parked without one)."""

from django.db import transaction

from ingest.decisions import NO_CONNECTION
from ingest.models import RawEvent, RawEventState
from ingest.queue import raw_event_enqueue
from ops.request_id import get_request_id


def reset_to_pending(ids: list[int]) -> int:
    return RawEvent.objects.filter(pk__in=ids).update(
        state=RawEventState.PENDING,
        processed_at=None,
        process_error=None,
        process_traceback=None,
        next_attempt_at=None,
        attempts=0,
        progress=0,
    )


def raw_events_replay(*, ids: list[int]) -> list[int]:
    """Re-run rows whatever their state: reset each to pending with a fresh attempt budget and
    queue it after commit. Normalizers are replay-safe, so replaying a processed row converges
    to the same tables. Returns the ids that exist (ingest.actions audits the operator's)."""
    with transaction.atomic():
        found = list(RawEvent.objects.filter(pk__in=ids).values_list("pk", flat=True))
        reset_to_pending(found)
        for pk in found:
            raw_event_enqueue(raw_event_id=pk, request_id=get_request_id())
    return found


def raw_events_requeue_for_terra_user(*, terra_user_id: str) -> int:
    """A connection for this Terra user now exists: give its rows parked for want of one
    another go at once (after commit). Returns how many were re-enqueued."""
    ids = list(
        RawEvent.objects.filter(
            terra_user_id=terra_user_id, state=RawEventState.PARKED, process_error=NO_CONNECTION
        ).values_list("pk", flat=True)
    )
    if ids:
        reset_to_pending(ids)
        for pk in ids:
            raw_event_enqueue(raw_event_id=pk, request_id=get_request_id())
    return len(ids)
