"""The drain: pick up raw events that got stuck (pending or parked in the last 24 h, retrying
rows whose backoff is over) and enqueue them, or consume them here with inline=True."""

from dataclasses import dataclass, field
from datetime import timedelta

from django.db.models import Case, Q, Value, When
from django.utils import timezone

from ingest.consumer import raw_event_consume
from ingest.decisions import NO_CONNECTION
from ingest.models import RawEvent, RawEventState
from ingest.queue import queue_publish
from ingest.replay import reset_to_pending
from ops.request_id import get_request_id

DRAIN_WINDOW = timedelta(hours=24)
DRAIN_MAX_LIMIT = 100


@dataclass
class DrainResult:
    """What one drain run picked up and, with inline=True, how each row ended (`outcomes` maps a
    RawEventState value or "not_claimed" to a count)."""

    limit: int = 0
    selected: int = 0
    enqueued: int = 0
    ids: list[int] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "selected": self.selected,
            "enqueued": self.enqueued,
            "ids": self.ids,
            "outcomes": self.outcomes,
        }


def drain_candidates(
    *, include_skipped: bool = False, include_no_connection: bool = False, now=None
):
    """Rows the drain may pick up: received in the last 24 h and unprocessed
    (pending or parked, not leased by a consumer right now), excluding rows parked for want of a
    connection (the auth normalizer re-enqueues those) unless asked; plus retrying rows whose
    backoff is over, whatever their age; plus skipped rows of the last 24 h when asked."""
    now = now or timezone.now()
    not_leased = Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now)
    recent = Q(received_at__gte=now - DRAIN_WINDOW)
    waiting = Q(state__in=[RawEventState.PENDING, RawEventState.PARKED]) & recent & not_leased
    if not include_no_connection:
        waiting &= ~Q(state=RawEventState.PARKED, process_error=NO_CONNECTION)
    wanted = waiting | (Q(state=RawEventState.RETRYING) & not_leased)
    if include_skipped:
        wanted |= Q(state=RawEventState.SKIPPED) & recent
    # Retries first, then pending, then parked: a crowd of parked rows never fills the limit
    # ahead of a retry (they also run on their own backoff through ingest.due).
    priority = Case(
        When(state=RawEventState.RETRYING, then=Value(0)),
        When(state=RawEventState.PENDING, then=Value(1)),
        default=Value(2),
    )
    return RawEvent.objects.filter(wanted).order_by(priority, "received_at", "pk")


def raw_events_drain(
    *,
    limit: int = 50,
    include_skipped: bool = False,
    include_no_connection: bool = False,
    inline: bool = False,
) -> DrainResult:
    """Pick up to `limit` (1…100) stuck rows and enqueue them — or, with inline=True, consume
    them in this process and count outcomes. Skipped rows it selects are reset to pending first."""

    limit = max(1, min(int(limit), DRAIN_MAX_LIMIT))
    rows = list(
        drain_candidates(
            include_skipped=include_skipped, include_no_connection=include_no_connection
        ).values_list("pk", "state")[:limit]
    )
    result = DrainResult(limit=limit, selected=len(rows), ids=[pk for pk, _ in rows])
    skipped = [pk for pk, state in rows if state == RawEventState.SKIPPED]
    if skipped:
        reset_to_pending(skipped)
    if inline:
        for pk in result.ids:
            outcome = raw_event_consume(pk)
            result.outcomes[outcome] = result.outcomes.get(outcome, 0) + 1
    else:
        for pk in result.ids:
            result.enqueued += queue_publish(pk, request_id=get_request_id())
    return result
