"""Deliveries for wiped users: a wipe records the digests of the user's Terra user ids and lab
upload references; a delivery that still names one is stored and skipped
(`skipped:wiped_user`) instead of parking forever for a user who will never come back, and it is
kept no longer than the traces (TRACE_RETENTION_DAYS)."""

import hashlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from ingest.models import RawEvent, RawEventState, WipedReference
from ingest.terra.envelope import LAB_REPORT

SKIPPED = "wiped_user"  # the row's process_error is skipped:wiped_user
# How long a wiped reference is remembered: Terra stops sending once the user is
# deauthenticated; this covers its retries and a deauthentication that took days to get through.
REMEMBER = timedelta(days=365)
# A salt of our own: the digest is of no use for matching against any other data set.
_SALT = b"vitalflow:wiped-reference:"

# (digests asked about, digests found) for the consumer's current batch.
_prefetched: ContextVar[tuple[frozenset, frozenset] | None] = ContextVar(
    "wiped_prefetched", default=None
)


def reference_digest(value: str) -> str:
    return hashlib.sha256(_SALT + value.encode()).hexdigest()


def wiped_references_record(*, values: Iterable[str]) -> int:
    """Remember `values` (Terra user ids, upload references) as wiped: only their digests."""
    digests = {reference_digest(v) for v in values if v}
    WipedReference.objects.bulk_create(
        [WipedReference(digest=d) for d in sorted(digests)], ignore_conflicts=True
    )
    return len(digests)


def _digests(row: RawEvent) -> set[str]:
    # Data deliveries name their Terra user; lab reports carry Terra's upload id as reference.
    values = [row.terra_user_id] + ([row.reference_id] if row.event_type == LAB_REPORT else [])
    return {reference_digest(v) for v in values if v}


@contextmanager
def wiped_prefetched(rows: Iterable[RawEvent]) -> Iterator[None]:
    """While the block runs, delivery_is_wiped answers for these rows without a query each."""
    asked = frozenset(d for row in rows for d in _digests(row))
    found = frozenset(_found(asked)) if asked else frozenset()
    token = _prefetched.set((asked, found))
    try:
        yield
    finally:
        _prefetched.reset(token)


def _found(digests: Iterable[str]) -> list[str]:
    return list(WipedReference.objects.filter(digest__in=digests).values_list("digest", flat=True))


def delivery_is_wiped(row: RawEvent) -> bool:
    digests = _digests(row)
    if not digests:
        return False
    known = _prefetched.get()
    if known is not None and digests <= known[0]:
        return bool(digests & known[1])
    return bool(_found(digests))


def wiped_deliveries_delete_expired() -> dict[str, int]:
    """The daily clean-up: skipped deliveries of wiped users older than the trace retention
    (their traces go with them), and references older than REMEMBER."""
    now = timezone.now()
    cutoff = now - timedelta(days=settings.TRACE_RETENTION_DAYS)
    deleted, _ = (
        RawEvent.objects.filter(
            state=RawEventState.SKIPPED,
            process_error=f"skipped:{SKIPPED}",
            received_at__lt=cutoff,
        )
        .only("id")
        .delete()
    )  # never load their bodies to delete them
    forgotten, _ = WipedReference.objects.filter(created_at__lt=now - REMEMBER).delete()
    return {"wiped_deliveries": deleted, "wiped_references": forgotten}
