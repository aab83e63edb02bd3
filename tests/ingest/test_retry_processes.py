"""Retries and recovery on time against a real qcluster on PostgreSQL: no drain
schedule exists here, so only the in-cluster due poller can run these rows."""

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from ingest.decisions import MAX_ATTEMPTS
from ingest.models import RawEvent, RawEventState
from tests.factories import RawEventFactory

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres_only,
    pytest.mark.slow,
]
WAIT_SECONDS = 90  # a bound for a stuck test, not a figure (bench/retries.py measures)


def _database_url() -> str:
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or '5432'}/{s['NAME']}"


@pytest.fixture
def cluster(tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "REDIS_URL": "",
        "VAR_DIR": str(tmp_path),
        # The queue this test publishes to (the ORM broker keys tasks by cluster name).
        "Q_CLUSTER_NAME": settings.Q_CLUSTER["name"],
        "INGEST_LEASE_SECONDS": "3",
        "LOG_LEVEL": "WARNING",
    }
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/ingest/qcluster_harness.py")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _wait_for(row, states) -> RawEvent:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        row.refresh_from_db()
        if row.state in states:
            return row
        time.sleep(0.2)
    return row


def test_a_retrying_row_runs_when_its_backoff_ends_without_the_drain(cluster):
    # Seen: a retry shown due at 07:45:16 ran at 07:48:17 (the next 5-minute drain).
    row = RawEventFactory(
        event_type="noop_test",
        payload={"type": "noop_test"},
        state=RawEventState.RETRYING,
        attempts=1,
        next_attempt_at=timezone.now() + timedelta(seconds=2),
    )
    assert _wait_for(row, {RawEventState.PROCESSED}).state == RawEventState.PROCESSED


def test_a_row_held_by_a_dead_worker_is_recovered(cluster):
    # Seen: rows held by a killed worker waited 6–9.5 minutes. Here the lease is 3 s; the
    # row looks claimed by a worker that died a moment ago.
    row = RawEventFactory(
        event_type="noop_test",
        payload={"type": "noop_test"},
        attempts=1,
        next_attempt_at=timezone.now() + timedelta(seconds=3),
    )
    assert _wait_for(row, {RawEventState.PROCESSED}).state == RawEventState.PROCESSED


def test_a_row_that_kills_its_worker_ends_dead_after_max_claims(cluster):
    # Seen: attempts only counted caught exceptions, so a worker-killing row never reached dead.
    row = RawEventFactory(event_type="kill_worker", payload={"type": "kill_worker"})
    from ingest.queue import queue_publish

    queue_publish(row.pk)
    row = _wait_for(row, {RawEventState.DEAD})
    assert row.state == RawEventState.DEAD
    assert row.attempts == MAX_ATTEMPTS + 1
    assert "without an outcome" in row.process_error


def _publish_one_task(how: str, first: RawEvent) -> None:
    from django.db import transaction

    from ingest.queue import consume_ticket_join, queue_publish

    if how == "row_task":
        queue_publish(first.pk)  # the due poller's, the drain's and Redis's kind of task
    else:
        with transaction.atomic():
            consume_ticket_join()  # the ORM broker's shared task, as deliveries join it


@pytest.mark.parametrize("how", ["row_task", "shared_task"])
def test_a_worker_killing_row_takes_no_batch_mate_to_dead(cluster, how):
    # Issue 15 claims many rows at once. The killer is claimed with its neighbours the first
    # time and the worker dies holding them all; after that a row whose worker died is only
    # claimed by itself and runs before anything else is claimed, so only the killer reaches
    # dead and its neighbours are processed, with attempts to spare.
    before = [
        RawEventFactory(event_type="noop_test", payload={"type": "noop_test"}) for _ in range(5)
    ]
    killer = RawEventFactory(event_type="kill_worker", payload={"type": "kill_worker"})
    after = [
        RawEventFactory(event_type="noop_test", payload={"type": "noop_test"}) for _ in range(5)
    ]
    _publish_one_task(how, before[0])
    assert _wait_for(killer, {RawEventState.DEAD}).state == RawEventState.DEAD
    mates = RawEvent.objects.filter(pk__in=[row.pk for row in before + after])
    for row in mates:
        _wait_for(row, {RawEventState.PROCESSED})
    assert {row.state for row in mates} == {RawEventState.PROCESSED}
    assert max(row.attempts for row in mates) <= 2
