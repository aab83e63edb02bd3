"""Bulk jobs (ops.models.BulkJob): one operator action over every row a filter matches, counted
before it is confirmed, then run in chunks by a django-q2 task (or in this process) with its
progress stored after each chunk. Apps register what a kind does; ops knows no app.

An app's actions module creates the job and its one audit row in one transaction
(bulk_job_create), and the kind's `finish` completes that row with the counts when it ends.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import Count, F, Max, Q, QuerySet
from django.utils import timezone

from ops.models import AuditLog, BulkJob

log = logging.getLogger(__name__)

CHUNK_SIZE = 100
RUN_TASK = "ops.bulk.bulk_job_run"


@dataclass(frozen=True)
class BulkKind:
    name: str  # "raw_events.replay", "workflow_instances.restart"
    # The rows a filter matches (the filter is validated here: bad input raises an ApiError).
    rows: Callable[[dict], QuerySet]
    # One chunk of row ids → (done, failed); commits its own work, row by row if it must.
    apply: Callable[[list[int]], tuple[int, int]]
    # Records how the job ended (the app's audit row); called once, after the last chunk.
    finish: Callable[[BulkJob], None]


_kinds: dict[str, BulkKind] = {}


def register(kind: BulkKind) -> None:
    _kinds[kind.name] = kind


def kind_get(name: str) -> BulkKind:
    return _kinds[name]


def bulk_count(*, kind: str, filters: dict) -> int:
    """How many rows the job would touch now: shown before the operator confirms."""
    return kind_get(kind).rows(filters).order_by().count()


def bulk_job_create(*, kind: str, filters: dict, actor: str) -> BulkJob:
    """Count the rows and store the job, queued (in the caller's transaction, with its audit
    row). Nothing runs until bulk_job_start."""
    matched = kind_get(kind).rows(filters).order_by().aggregate(n=Count("pk"), high=Max("pk"))
    return BulkJob.objects.create(
        kind=kind,
        filter=filters,
        total=matched["n"],
        high_water=matched["high"] or 0,
        actor=actor[:200],
    )


def bulk_job_start(job: BulkJob, *, inline: bool = False) -> None:
    """Run the job: here and now to its end (`inline`: commands, tests), else on the cluster
    once the caller's transaction commits."""
    if inline:
        bulk_job_run(job.pk, seconds=None)
        return
    transaction.on_commit(lambda: _enqueue(job.pk))


def _enqueue(job_id: int) -> None:
    from django_q.tasks import async_task

    async_task(RUN_TASK, job_id, q_options={"task_name": f"bulk-job-{job_id}"})


# A task works on a job for at most SLICE_SECONDS, then queues the next task for the rest: a
# big job never meets the cluster's task timeout (Q_TIMEOUT, 300 s by default), and other work
# gets a worker between slices. A running job that has not stored a chunk for STALE_SECONDS
# (longer than any slice plus the cluster's timeout) lost its process: it is taken over.
SLICE_SECONDS = 60.0
STALE_SECONDS = 600


def _claim(job_id: int) -> bool:
    now = timezone.now()
    claimable = Q(state=BulkJob.State.QUEUED) | Q(
        state=BulkJob.State.RUNNING, progress_at__lt=now - timedelta(seconds=STALE_SECONDS)
    )
    return bool(
        BulkJob.objects.filter(claimable, pk=job_id).update(
            state=BulkJob.State.RUNNING, progress_at=now
        )
    )


def bulk_job_run(
    job_id: int, *, chunk_size: int = CHUNK_SIZE, seconds: float | None = SLICE_SECONDS
) -> BulkJob:
    """The django-q2 task: claim the job (queued → running, compare-and-set, so a second
    delivery of the task does nothing), walk its rows in id order a chunk at a time, storing
    the counts and the cursor after each chunk; after `seconds` (None: no limit) hand the rest
    to a new task; at the end, finish it and let its kind record the outcome."""
    if not _claim(job_id):
        return BulkJob.objects.get(pk=job_id)
    job = BulkJob.objects.get(pk=job_id)
    kind = kind_get(job.kind)
    deadline = None if seconds is None else time.monotonic() + seconds
    state, error = BulkJob.State.FINISHED, ""
    try:
        while True:
            ids = list(
                kind.rows(job.filter)
                .filter(pk__gt=job.cursor, pk__lte=job.high_water)
                .order_by("pk")
                .values_list("pk", flat=True)[:chunk_size]
            )
            if not ids:
                break
            done, failed = kind.apply(ids)
            BulkJob.objects.filter(pk=job.pk).update(
                done=F("done") + done,
                failed=F("failed") + failed,
                cursor=ids[-1],
                progress_at=timezone.now(),
            )
            job.refresh_from_db(fields=["done", "failed", "cursor"])
            more = len(ids) == chunk_size  # a short chunk was the last one
            if more and deadline is not None and time.monotonic() >= deadline:
                BulkJob.objects.filter(pk=job.pk).update(state=BulkJob.State.QUEUED)
                _enqueue(job.pk)
                job.refresh_from_db()
                return job
    except Exception as exc:  # the job says it broke; the rows done so far stay done
        log.exception("bulk job %s failed", job.pk)
        state, error = BulkJob.State.FAILED, f"{type(exc).__name__}: {exc}"[:500]
    BulkJob.objects.filter(pk=job.pk).update(state=state, error=error, finished_at=timezone.now())
    job.refresh_from_db()
    kind.finish(job)
    return job


def bulk_jobs_resume() -> int:
    """The five-minute schedule: queue a task for every job nobody is working on — running
    with no chunk stored for STALE_SECONDS (its worker was killed), or queued that long (its
    task was lost). Returns how many."""
    stale = timezone.now() - timedelta(seconds=STALE_SECONDS)
    untouched = Q(progress_at__isnull=True) | Q(progress_at__lt=stale)
    orphans = BulkJob.objects.filter(
        Q(state=BulkJob.State.RUNNING, progress_at__lt=stale)
        | (Q(state=BulkJob.State.QUEUED, created_at__lt=stale) & untouched)
    )
    ids = list(orphans.values_list("pk", flat=True))
    for job_id in ids:
        _enqueue(job_id)
    return len(ids)


def bulk_job_outcome(job: BulkJob) -> dict:
    """The counts an audit row keeps (never a row's values)."""
    return {
        "job": job.pk,
        "kind": job.kind,
        "filter": job.filter,
        "total": job.total,
        "done": job.done,
        "failed": job.failed,
        "state": job.state,
    }


def bulk_job_audit_complete(job: BulkJob) -> None:
    """A kind's `finish`: complete the job's one audit row with its counts (never values)."""
    if job.state == BulkJob.State.FINISHED:
        result = "ok" if not job.failed else f"partial:{job.failed}_failed"
    else:
        result = job.state
    metadata = bulk_job_outcome(job)
    if job.error:
        metadata["error"] = job.error
    AuditLog.objects.filter(pk=job.audit_id).update(result=result[:50], metadata=metadata)
