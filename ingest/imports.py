"""Historical imports (POST /v1/import): reconcile, ask Terra for N days of every type on every
active connection, and report progress.

Progress is derived, not counted by the consumer: Terra's backfill chunks arrive as ordinary
webhooks that do not name the request they answer, so a job counts the user's data deliveries
received since it started (chunks) and the typed rows written since then (rows). Two jobs that
overlap share those figures; for "is my history arriving?" that is the honest, simple answer.
"""

from datetime import timedelta

from django.db.models import Count, Q
from django.utils import timezone

from ingest.connections import connection_backfill, connections_reconcile
from ingest.errors import InvalidDays, NoActiveConnection, TerraUnavailable
from ingest.models import ImportJob, RawEvent, RawEventState, TerraConnection
from ingest.registry import user_tables
from ingest.terra.client import BACKFILL_TYPES

MIN_DAYS, MAX_DAYS, DEFAULT_DAYS = 1, 1460, 365


def parse_days(raw) -> int:
    if raw is None:
        return DEFAULT_DAYS
    # bool is an int in Python; "days": true is not a number of days.
    if isinstance(raw, bool) or not isinstance(raw, int) or not MIN_DAYS <= raw <= MAX_DAYS:
        raise InvalidDays(f"days must be an integer from {MIN_DAYS} to {MAX_DAYS}.")
    return raw


def import_start(*, user, days: int) -> ImportJob:
    """Reconcile first (so a connection Terra knows and we missed gets its history too), then
    one backfill request per active connection × type."""
    connections_reconcile(user=user)
    connections = list(
        TerraConnection.objects.filter(user=user, deactivated_at__isnull=True).order_by("id")
    )
    if not connections:
        raise NoActiveConnection("Connect a wearable first (POST /v1/connect).")
    requested = []
    for connection in connections:
        requested += connection_backfill(connection=connection, days=days, types=BACKFILL_TYPES)
    if all(r["status"] != "requested" for r in requested):
        raise TerraUnavailable(
            "Terra refused or did not answer every backfill request; nothing was started.",
            requested=requested,
        )
    today = timezone.now().date()
    return ImportJob.objects.create(
        user=user,
        days=days,
        start_date=today - timedelta(days=days),
        end_date=today,
        requested=requested,
    )


def import_job_refresh(*, job: ImportJob) -> ImportJob:
    """Recount a job's progress (see the module docstring) and store it on the row."""
    terra_ids = list(
        TerraConnection.objects.filter(user=job.user_id).values_list("terra_user_id", flat=True)
    )
    chunks = RawEvent.objects.filter(
        Q(user_id=job.user_id) | Q(terra_user_id__in=terra_ids),
        event_type__in=BACKFILL_TYPES,
        received_at__gte=job.created_at,
    ).aggregate(
        received=Count("id"),
        pending=Count(
            "id",
            filter=Q(
                state__in=[RawEventState.PENDING, RawEventState.PARKED, RawEventState.RETRYING]
            ),
        ),
    )
    rows = sum(
        t.model.objects.filter(user_id=job.user_id, updated_at__gte=job.created_at).count()
        for t in user_tables()
        if t.sync
    )
    job.chunks_received = chunks["received"]
    job.rows_normalized = rows
    job.updated_at = timezone.now()
    job.save(update_fields=["chunks_received", "rows_normalized", "updated_at"])
    job.chunks_pending = chunks["pending"]
    return job


def import_job_summary(job: ImportJob) -> dict:
    requested = job.requested or []
    return {
        "id": job.pk,
        "days": job.days,
        "start_date": job.start_date,
        "end_date": job.end_date,
        "created_at": job.created_at,
        "requests": len(requested),
        "requests_failed": sum(1 for r in requested if r.get("status") != "requested"),
        "chunks_received": job.chunks_received,
        "chunks_pending": getattr(job, "chunks_pending", None),
        "rows_normalized": job.rows_normalized,
    }
