"""Newest data wins (issue 10 §1): every raw event keeps Terra's ordering time, and a record is
written by the delivery Terra emitted last, whatever order the deliveries arrive in."""

from datetime import UTC, datetime

import pytest
from django.utils import timezone

from ingest.models import RawEvent
from ingest.replay import raw_events_replay
from tests.conftest import load_fixture

pytestmark = pytest.mark.django_db

ORDERING = "HTTP_X_TERRA_ORDERING_TIMESTAMP"


def test_the_ordering_header_is_stored_as_the_events_ordering_time(deliver):
    response = deliver(load_fixture("daily.json"), headers={ORDERING: "1782890000123"})
    row = RawEvent.objects.get(pk=response.json()["raw_event_id"])
    assert row.ordered_at == datetime(2026, 7, 1, 7, 13, 20, 123000, tzinfo=UTC)


@pytest.mark.parametrize("header", [None, "", "soon", "-5", "12", "1.5e12", "99999999999999"])
def test_without_a_usable_header_the_ordering_time_is_the_receipt(deliver, header):
    before = timezone.now()
    headers = {ORDERING: header} if header is not None else {}
    response = deliver(load_fixture("daily.json"), headers=headers)
    row = RawEvent.objects.get(pk=response.json()["raw_event_id"])
    assert row.ordered_at == row.received_at
    assert row.received_at >= before


def test_a_replay_keeps_the_original_ordering_time(deliver, django_capture_on_commit_callbacks):
    response = deliver(load_fixture("daily.json"), headers={ORDERING: "1782890000123"})
    pk = response.json()["raw_event_id"]
    with django_capture_on_commit_callbacks(execute=False):
        raw_events_replay(ids=[pk], actor="test")
    assert RawEvent.objects.get(pk=pk).ordered_at == datetime(
        2026, 7, 1, 7, 13, 20, 123000, tzinfo=UTC
    )
