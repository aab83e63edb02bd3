"""The raw events list's live refresh: a stamp that moves whenever a delivery lands or any row
gets an outcome (both write a trace row, so the newest trace id says it), and whether anything
is still waiting for the consumer (pending or retrying rows)."""

import json

from django.db.models import Max

from ingest.models import RawEvent, RawEventState, TraceEvent


def raw_events_live() -> dict:
    newest_trace = TraceEvent.objects.aggregate(last=Max("id"))["last"]
    newest_event = RawEvent.objects.aggregate(last=Max("id"))["last"]
    in_flight = RawEvent.objects.filter(
        state__in=(RawEventState.PENDING, RawEventState.RETRYING)
    ).exists()
    return {"in_flight": in_flight, "stamp": json.dumps([newest_event, newest_trace])}
