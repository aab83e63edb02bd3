"""The consumer reports progress (ops.liveness) when it finishes rows, so a cluster that beats
but finishes nothing can be told from one that works."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from ingest.consumer import raw_event_consume, raw_events_consume_batch
from ingest.models import RawEventState
from ops import liveness
from tests.factories import RawEventFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_progress_yet(monkeypatch):
    monkeypatch.setattr(liveness, "_last_progress", None)


def _marked_since(began: float) -> bool:
    age = liveness.progress_age()
    return age is not None and age <= time.monotonic() - began


def test_a_finished_row_is_progress():
    row = RawEventFactory(event_type="athlete", payload={"type": "athlete"})
    began = time.monotonic()
    assert raw_event_consume(row.pk) == RawEventState.SKIPPED
    assert _marked_since(began)


def test_rows_finished_together_are_progress():
    rows = [RawEventFactory(event_type="athlete", payload={"type": "athlete"}) for _ in range(3)]
    began = time.monotonic()
    assert raw_events_consume_batch(rows[0].pk) == {RawEventState.SKIPPED: 3}
    assert _marked_since(began)


def test_a_row_that_fails_is_progress_too_its_outcome_was_written():
    row = RawEventFactory(event_type="daily", payload={"type": "daily", "data": "not a list"})
    began = time.monotonic()
    assert raw_event_consume(row.pk) != "not_claimed"
    assert _marked_since(began)


def test_a_row_not_claimed_is_no_progress():
    row = RawEventFactory(
        state=RawEventState.RETRYING,
        attempts=1,
        next_attempt_at=timezone.now() + timedelta(minutes=5),
    )
    assert raw_event_consume(row.pk) == "not_claimed"
    assert liveness.progress_age() is None
