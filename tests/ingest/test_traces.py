"""Traces: written without breaking the work, filtered by request id / raw event / user, and
cleaned up after TRACE_RETENTION_DAYS."""

from datetime import timedelta

import pytest
from django.utils import timezone

from ingest.models import TraceEvent
from ingest.selectors import traces
from ingest.traces import trace_write, traces_delete_expired
from ops.request_id import reset_request_id, set_request_id
from tests.factories import RawEventFactory

pytestmark = pytest.mark.django_db


def test_trace_takes_the_current_request_id():
    token = set_request_id("rq-42")
    try:
        trace_write("consume_event", data={"n": 1})
    finally:
        reset_request_id(token)
    assert TraceEvent.objects.get().request_id == "rq-42"


def test_one_delivery_journey_is_one_query_by_request_id():
    row = RawEventFactory(request_id="rq-1")
    for event in ("webhook_received", "queue_published", "consume_event", "normalized"):
        trace_write(event, raw_event_id=row.pk, request_id="rq-1")
    trace_write("webhook_received", request_id="rq-2")
    assert [t.event for t in traces(filters={"request_id": "rq-1"})] == [
        "normalized",
        "consume_event",
        "queue_published",
        "webhook_received",
    ]


def test_a_trace_that_cannot_be_written_never_raises(monkeypatch):
    from ingest import traces as module

    class Broken(module.DjangoJSONEncoder):
        def encode(self, o):
            raise RuntimeError("cannot encode")

    monkeypatch.setattr(module, "DjangoJSONEncoder", Broken)
    trace_write("normalized")  # logged, not raised
    assert not TraceEvent.objects.exists()


def test_values_are_clipped_to_their_columns_and_data_is_lenient():
    from datetime import date

    trace_write(
        "e" * 100, request_id="r" * 200, level="verbose-level", data={"day": date(2026, 1, 2)}
    )
    row = TraceEvent.objects.get()
    assert len(row.event) == 64 and len(row.request_id) == 128 and len(row.level) == 10
    assert row.data == {"day": "2026-01-02"}
    assert abs((timezone.now() - row.created_at).total_seconds()) < 5


def test_expired_traces_are_deleted():
    trace_write("old")
    trace_write("new")
    TraceEvent.objects.filter(event="old").update(created_at=timezone.now() - timedelta(days=40))
    assert traces_delete_expired(days=30) == 1
    assert list(TraceEvent.objects.values_list("event", flat=True)) == ["new"]
