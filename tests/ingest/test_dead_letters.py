"""A dead letter says why it died: a row's last real error is never replaced by a generic one,
"its worker died" is written only when no attempt recorded an outcome, and rows parked for a
deterministic error follow the parked rows' 24-hour backoff instead of running out of attempts."""

from datetime import timedelta

import pytest
from django.utils import timezone

from ingest import registry
from ingest.consumer import raw_event_consume
from ingest.decisions import MAX_ATTEMPTS
from ingest.drain import raw_events_drain
from ingest.models import RawEvent, RawEventState
from ingest.registry import ValueOutOfRange
from tests.factories import RawEventFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def refusing(monkeypatch):
    def refuse(raw_event):
        raise ValueOutOfRange("daily_summary.steps = 100000000000000000000 is out of range")

    monkeypatch.setitem(registry._normalizers, "refusing", refuse)


@pytest.fixture
def exploding(monkeypatch):
    def explode(raw_event):
        raise RuntimeError("upstream schema changed")

    monkeypatch.setitem(registry._normalizers, "exploding", explode)


def make(event_type: str, **kwargs) -> RawEvent:
    return RawEventFactory(
        event_type=event_type,
        payload={"type": event_type},
        received_at=timezone.now() - timedelta(minutes=10),
        **kwargs,
    )


def test_a_row_parked_for_a_deterministic_error_keeps_it_through_every_drain(refusing):
    # Seen: such rows kept their attempt count, were re-queued by each drain and, after the
    # 5th claim, ended dead "claimed 5 times without an outcome: its worker died each time"
    # about 25 minutes after arriving, their real error overwritten.
    row = make("refusing")
    for _ in range(MAX_ATTEMPTS + 2):
        RawEvent.objects.filter(pk=row.pk).update(next_attempt_at=timezone.now())
        raw_events_drain(inline=True)
        row.refresh_from_db()
        assert row.state == RawEventState.PARKED
        assert row.process_error.startswith("value_out_of_range: daily_summary.steps")
    assert row.attempts == 0  # an outcome was written: no step towards dead


def test_a_row_parked_for_a_deterministic_error_is_tried_again_on_the_park_backoff(refusing):
    row = make("refusing")
    raw_event_consume(row.pk)
    row.refresh_from_db()
    wait = row.next_attempt_at - timezone.now()
    # Half its age (10 minutes), as every parked row younger than a day.
    assert timedelta(minutes=4) < wait <= timedelta(minutes=5, seconds=1)


def test_a_row_whose_worker_died_after_a_real_error_dies_with_that_error(exploding):
    # Four claims raised (retrying, the error recorded), then a worker died holding the row:
    # the next claim is past the limit, and the dead letter names the error, not a crash.
    row = make(
        "exploding",
        state=RawEventState.RETRYING,
        attempts=MAX_ATTEMPTS,
        process_error="RuntimeError: upstream schema changed",
        next_attempt_at=timezone.now() - timedelta(seconds=1),
    )
    assert raw_event_consume(row.pk) == RawEventState.DEAD
    row.refresh_from_db()
    assert row.process_error.startswith("RuntimeError: upstream schema changed")
    assert "without an outcome" not in row.process_error.split("(")[0]


def test_a_row_no_attempt_recorded_an_outcome_for_dies_as_a_crash(exploding):
    row = make("exploding", attempts=MAX_ATTEMPTS, next_attempt_at=timezone.now())
    assert raw_event_consume(row.pk) == RawEventState.DEAD
    row.refresh_from_db()
    assert "without an outcome: its worker died or lost its lease each time" in row.process_error
