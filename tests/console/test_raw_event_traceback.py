"""A raw event whose normalizer raised keeps a bounded traceback (frames only) in
process_traceback, written by the one outcome writer with its error; its page shows it; an
outcome that did not raise clears it."""

from datetime import timedelta

import pytest
from django.utils import timezone

from ingest import registry
from ingest.consumer import raw_event_consume
from ingest.decisions import MAX_ATTEMPTS
from ingest.models import RawEvent, RawEventState
from ingest.registry import NormalizeResult
from tests.factories import RawEventFactory


def _parse_reading(raw_event):
    reading = raw_event.payload["reading"]  # a local holding health data
    raise RuntimeError(f"upstream schema changed ({len(reading)} chars)")


@pytest.fixture
def exploding(monkeypatch):
    monkeypatch.setitem(registry._normalizers, "exploding", _parse_reading)


def make(event_type="exploding") -> RawEvent:
    return RawEventFactory(
        event_type=event_type,
        payload={"type": event_type, "reading": "glucose=7.9"},
        received_at=timezone.now() - timedelta(minutes=10),
    )


def consume_until_dead(row: RawEvent) -> RawEvent:
    for _ in range(MAX_ATTEMPTS):
        RawEvent.objects.filter(pk=row.pk).update(next_attempt_at=timezone.now())
        raw_event_consume(row.pk)
    row.refresh_from_db()
    return row


def test_a_dead_raw_event_keeps_the_frames_of_its_error_but_no_values(exploding, db):
    row = consume_until_dead(make())
    assert row.state == RawEventState.DEAD
    assert "in _parse_reading" in row.process_traceback
    assert row.process_traceback.rstrip().endswith("RuntimeError")
    assert "glucose" not in row.process_traceback


def test_a_retrying_row_has_one_too(exploding, db):
    row = make()
    raw_event_consume(row.pk)
    row.refresh_from_db()
    assert row.state == RawEventState.RETRYING and "_parse_reading" in row.process_traceback


def test_the_raw_event_page_shows_the_traceback(exploding, console):
    row = consume_until_dead(make())
    html = console.get(f"/admin/ingest/rawevent/{row.pk}/change/").content.decode()
    assert 'class="vf-traceback"' in html and "in _parse_reading" in html


def test_an_outcome_that_did_not_raise_clears_the_traceback(exploding, monkeypatch, db):
    row = make()
    raw_event_consume(row.pk)
    monkeypatch.setitem(
        registry._normalizers, "exploding", lambda raw_event: NormalizeResult(ok=True, rows=1)
    )
    RawEvent.objects.filter(pk=row.pk).update(next_attempt_at=timezone.now())
    raw_event_consume(row.pk)
    row.refresh_from_db()
    assert row.state == RawEventState.PROCESSED and row.process_traceback is None


def test_a_replay_or_a_manual_skip_clears_the_traceback(exploding, console):
    from ingest.actions import do_raw_events_mark_skipped
    from ingest.replay import reset_to_pending

    first, second = consume_until_dead(make()), consume_until_dead(make())
    reset_to_pending([first.pk])
    first.refresh_from_db()
    assert first.state == RawEventState.PENDING and first.process_traceback is None
    assert second.process_traceback
    do_raw_events_mark_skipped(ids=[second.pk], reason="triaged", actor="test")
    second.refresh_from_db()
    assert second.state == RawEventState.SKIPPED and second.process_traceback is None
