"""Slow work cannot stop ingestion, against a real 2-worker qcluster on PostgreSQL: pings to a
bucket that trickles cost at most one worker for at most the download deadline, and a delivery
too big for one lease is normalized in pieces that each commit and renew it, so it finishes."""

import json
import time
from datetime import UTC, date, datetime, timedelta

import pytest
from django.utils import timezone

from ingest.models import DailySummary, RawEvent, RawEventState
from ingest.queue import queue_publish
from tests.factories import RawEventFactory, TerraConnectionFactory, UserFactory
from tests.ingest.slow_bucket import trickling_bucket
from tests.ingest.test_retry_processes import cluster  # noqa: F401, F811 - fixture

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres_only,
    pytest.mark.slow,
]
WAIT_SECONDS = 60  # a bound for a stuck test, not a figure (bench/slow_bucket.py measures)


def _wait(predicate) -> bool:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.25)
    return False


@pytest.fixture
def bucket(monkeypatch):
    with trickling_bucket(interval=1.0, total=600) as served:
        monkeypatch.setenv("HARNESS_BUCKET_PORT", str(served["port"]))
        monkeypatch.setenv("TERRA_S3_PAYLOAD_DEADLINE_SECONDS", "3")
        yield served


def _ping(n: int) -> RawEvent:
    url = f"https://bucket.s3.amazonaws.com/payloads/{n}.json"
    payload = {"type": "s3_payload", "status": "success", "url": url, "expires_in": 3600}
    return RawEventFactory(event_type="s3_payload", payload=payload)


def test_two_pings_to_a_bucket_that_trickles_do_not_stop_the_other_deliveries(
    bucket,
    cluster,  # noqa: F811
):
    # Seen: two such pings held both consumer workers for 20 minutes: 0 rows processed, 94
    # deliveries waiting, pings due for a retry 18.6 minutes late and lost to expiry.
    pings = [_ping(n) for n in (1, 2)]
    for row in pings:
        queue_publish(row.pk)
    time.sleep(1)  # both pings are claimed first
    others = [
        RawEventFactory(event_type="noop_test", payload={"type": "noop_test"}) for _ in range(40)
    ]
    for row in others:
        queue_publish(row.pk)
    ids = [row.pk for row in others]
    assert _wait(
        lambda: RawEvent.objects.filter(pk__in=ids, state=RawEventState.PROCESSED).count() == 40
    )
    # The pings are still waiting on the bucket, one download at a time, each within its
    # deadline: retried with the reason, or deferred while the other one downloads.
    for row in pings:
        row.refresh_from_db()
        assert row.state in (RawEventState.PENDING, RawEventState.RETRYING), row.state
        if row.state == RawEventState.RETRYING:
            assert row.process_error.split(":")[0] in ("TooSlow", "s3_payload_host_busy")


def test_a_delivery_too_big_for_one_lease_finishes_in_pieces(cluster):  # noqa: F811
    # Seen: a daily delivery of 150,000 items (about a minute of work) never finished: the 90 s
    # lease ran out mid-work, another worker claimed it, the first one's work rolled back, and
    # after five claims the row was dead with 0 rows written. Here the lease is 3 s (the
    # cluster fixture) and the delivery about 6,000 items.
    user = UserFactory(username="big")
    TerraConnectionFactory(user=user, terra_user_id="t-big")
    first = date(2001, 1, 1)
    items = [
        {
            "metadata": {"start_time": f"{first + timedelta(days=n)}T00:00:00+00:00"},
            "distance_data": {"steps": n},
        }
        for n in range(6000)
    ]
    payload = {
        "type": "daily",
        "user": {"user_id": "t-big", "provider": "GARMIN", "reference_id": "big"},
        "data": items,
    }
    row = RawEventFactory(
        event_type="daily",
        terra_user_id="t-big",
        reference_id="big",
        provider="GARMIN",
        payload=payload,
        ordered_at=datetime(2026, 7, 1, tzinfo=UTC),
    )
    assert len(json.dumps(payload)) < 1024 * 1024  # travels with its claim: not the body path
    queue_publish(row.pk)
    assert _wait(lambda: RawEvent.objects.get(pk=row.pk).state != RawEventState.PENDING)
    row.refresh_from_db()
    assert row.state == RawEventState.PROCESSED, (row.state, row.process_error, row.attempts)
    assert DailySummary.objects.filter(user=user).count() == 6000
    assert row.attempts == 1  # never claimed by another worker meanwhile
    assert row.received_at <= timezone.now()
