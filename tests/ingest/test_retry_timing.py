"""Retries and recovery on time, in process on both databases: due rows are found
retries first, parked rows back off on their own clock, attempts count claims, and a row
claimed MAX_ATTEMPTS times without an outcome (its worker was killed) ends dead."""

from datetime import timedelta

import pytest
from django.utils import timezone

from ingest import registry
from ingest.consumer import raw_event_consume, raw_events_consume_batch
from ingest.decisions import MAX_ATTEMPTS
from ingest.due import DuePoller, due_ids
from ingest.models import RawEvent, RawEventState
from ingest.registry import NormalizeResult
from ingest.tasks import drain_task
from tests.factories import RawEventFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def calls(monkeypatch):
    seen: list[int] = []

    def noop(raw_event):
        seen.append(raw_event.pk)
        return NormalizeResult(ok=True)

    def flaky(raw_event):
        seen.append(raw_event.pk)
        return NormalizeResult(ok=False, error="upstream_not_ready")

    monkeypatch.setitem(registry._normalizers, "noop", noop)
    monkeypatch.setitem(registry._normalizers, "flaky", flaky)
    return seen


def make(state=RawEventState.PENDING, *, age=timedelta(minutes=10), **kwargs):
    kwargs.setdefault("event_type", "noop")
    kwargs.setdefault("payload", {"type": kwargs["event_type"]})
    return RawEventFactory(state=state, received_at=timezone.now() - age, **kwargs)


def parked_crowd(count: int = 200) -> None:
    due = timezone.now() - timedelta(seconds=5)
    for _ in range(count):
        make(
            RawEventState.PARKED,
            event_type="flaky",
            process_error="upstream_not_ready",
            age=timedelta(hours=2),
            next_attempt_at=due,
        )


def test_a_due_retry_behind_200_due_parked_rows_is_not_held_up(calls):
    # Seen: with 60 parked rows every drain re-ran the same 50 oldest parked rows and a retrying
    # row sat at attempts=2 through four drains.
    parked_crowd()
    retry = make(
        RawEventState.RETRYING, attempts=2, next_attempt_at=timezone.now() - timedelta(seconds=1)
    )
    drain_task()  # the 5-minute safety net
    raw_events_consume_batch(None)  # any running consumer task
    retry.refresh_from_db()
    assert retry.state == RawEventState.PROCESSED


def test_due_rows_are_listed_retries_first_then_expired_leases_then_parked(calls):
    parked_crowd(30)
    retry = make(RawEventState.RETRYING, next_attempt_at=timezone.now() - timedelta(seconds=1))
    orphan = make(next_attempt_at=timezone.now() - timedelta(seconds=1))  # its worker died
    make(RawEventState.RETRYING, next_attempt_at=timezone.now() + timedelta(minutes=1))
    ids = due_ids(limit=5)
    assert ids[:2] == [retry.pk, orphan.pk]
    assert len(ids) == 5


def test_the_poller_publishes_each_due_row_once_while_it_stays_due(calls, monkeypatch):
    from ingest import due

    published: list[int] = []
    monkeypatch.setattr(due, "queue_publish", lambda pk, **kw: published.append(pk) or True)
    row = make(RawEventState.RETRYING, next_attempt_at=timezone.now() - timedelta(seconds=1))
    poller = DuePoller()
    poller.tick()
    poller.tick()
    assert published == [row.pk]


def test_parked_rows_retry_on_their_own_growing_backoff(calls):
    # Seen: parked rows were only picked up by the 5-minute drain, oldest first.
    row = make(event_type="flaky", age=timedelta(minutes=4))
    raw_event_consume(row.pk)
    row.refresh_from_db()
    assert row.state == RawEventState.PARKED
    first = row.next_attempt_at - timezone.now()
    assert timedelta(seconds=60) < first <= timedelta(minutes=2, seconds=1)
    RawEvent.objects.filter(pk=row.pk).update(
        next_attempt_at=timezone.now(), received_at=timezone.now() - timedelta(minutes=40)
    )
    raw_event_consume(row.pk)
    row.refresh_from_db()
    assert row.next_attempt_at - timezone.now() > first
    assert row.attempts == 0  # a parked outcome is an outcome: no step towards dead


def test_parked_rows_older_than_a_day_wait_for_an_operator(calls):
    row = make(event_type="flaky", age=timedelta(hours=25))
    raw_event_consume(row.pk)
    row.refresh_from_db()
    assert (row.state, row.next_attempt_at) == (RawEventState.PARKED, None)


def test_a_row_claimed_max_attempts_times_without_an_outcome_is_dead_at_its_next_claim(calls):
    # Seen: attempts only counted caught exceptions, so a row that kills its worker (OOM,
    # segfault) was claimed forever. Here: five claims whose worker never wrote an outcome.
    row = make(attempts=MAX_ATTEMPTS, next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert raw_event_consume(row.pk) == RawEventState.DEAD
    row.refresh_from_db()
    assert row.state == RawEventState.DEAD
    assert "without an outcome" in row.process_error
    assert calls == []  # not run a sixth time


def test_a_row_whose_worker_died_is_claimable_when_its_lease_runs_out(calls, settings):
    settings.INGEST_LEASE_SECONDS = 90
    row = make(attempts=1, next_attempt_at=timezone.now() + timedelta(seconds=30))  # held
    assert raw_event_consume(row.pk) == "not_claimed"
    RawEvent.objects.filter(pk=row.pk).update(next_attempt_at=timezone.now())
    assert raw_event_consume(row.pk) == RawEventState.PROCESSED
    row.refresh_from_db()
    assert row.attempts == 2
