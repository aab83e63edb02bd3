"""ops.bulk runs a bulk job in slices of chunks with its progress stored: a big job hands the
rest to a new task instead of meeting the cluster's timeout, a job whose worker died is taken
over from its cursor, and a job that breaks says so in its state and its one audit row."""

from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone
from django_q.models import OrmQ

from ingest.actions import do_raw_events_bulk_replay
from ingest.models import RawEvent
from ops import bulk
from ops.models import AuditLog, BulkJob
from tests.factories import RawEventFactory


@pytest.fixture
def dead_sleep(db):
    RawEventFactory.create_batch(250, event_type="sleep", state="dead", attempts=5)


def _run_tasks() -> list:
    """The bulk-job tasks waiting on the ORM broker (replays queue consume tasks there too)."""
    from django_q.signing import SignedPackage

    tasks = [SignedPackage.loads(m.payload) for m in OrmQ.objects.all()]
    return [t["args"] for t in tasks if t["func"] == bulk.RUN_TASK]


def _job() -> BulkJob:
    return do_raw_events_bulk_replay(filters={"state": ["dead"]}, actor="user:ann")


def test_a_job_hands_the_rest_to_a_new_task_when_its_slice_is_over(dead_sleep):
    job = bulk.bulk_job_run(_job().pk, chunk_size=100, seconds=0)
    assert (job.state, job.done, job.total) == ("queued", 100, 250)
    assert _run_tasks() == [(job.pk,)]  # the next slice's task
    job = bulk.bulk_job_run(job.pk, chunk_size=100, seconds=0)
    assert (job.state, job.done) == ("queued", 200)
    job = bulk.bulk_job_run(job.pk, chunk_size=100, seconds=0)
    assert (job.state, job.done, job.failed) == ("finished", 250, 0)
    assert AuditLog.objects.get().metadata["done"] == 250


def test_a_second_delivery_of_a_running_jobs_task_does_nothing(dead_sleep):
    job = _job()
    BulkJob.objects.filter(pk=job.pk).update(state="running", progress_at=timezone.now())
    assert bulk.bulk_job_run(job.pk).done == 0
    assert RawEvent.objects.filter(state="dead").count() == 250


def test_a_job_whose_worker_died_is_queued_again_and_goes_on_from_its_cursor(dead_sleep):
    job = bulk.bulk_job_run(_job().pk, chunk_size=100, seconds=0)  # 100 done, then "killed"
    OrmQ.objects.all().delete()
    long_ago = timezone.now() - timedelta(seconds=bulk.STALE_SECONDS + 60)
    BulkJob.objects.filter(pk=job.pk).update(state="running", progress_at=long_ago)

    assert bulk.bulk_jobs_resume() == 1
    assert _run_tasks() == [(job.pk,)]
    job = bulk.bulk_job_run(job.pk)
    assert (job.state, job.done, job.total) == ("finished", 250, 250)
    assert bulk.bulk_jobs_resume() == 0


def test_a_job_that_breaks_ends_failed_and_its_audit_row_says_so(dead_sleep):
    def apply(ids):
        RawEvent.objects.filter(pk__in=ids).update(attempts=F("attempts") + 1)
        raise RuntimeError("the replay broke")

    real = bulk.kind_get("raw_events.replay")
    bulk.register(bulk.BulkKind(real.name, real.rows, apply, real.finish))
    try:
        job = bulk.bulk_job_run(_job().pk)
    finally:
        bulk.register(real)
    assert (job.state, job.done) == ("failed", 0)
    assert job.error == "RuntimeError: the replay broke"
    row = AuditLog.objects.get()
    assert (row.result, row.metadata["error"]) == ("failed", "RuntimeError: the replay broke")
