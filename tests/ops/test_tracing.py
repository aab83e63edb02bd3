"""OpenTelemetry (the `otel` extra): with an SDK configured, a workflow run, each step
attempt, the webhook request and the consumer's handling of that raw event become spans (the
consumer's linked to the webhook's, both carrying the request id); without the package nothing
is imported and nothing changes. Spans are read with the SDK's in-memory exporter."""

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tests.workflows.sample_workflows  # noqa: F401 - registers the sample workflows
from ingest import tasks as ingest_tasks
from tests.conftest import load_fixture
from workflows import NonRetryableError, workflow
from workflows.authoring import registry
from workflows.testing import WorkflowHarness

ROOT = Path(__file__).resolve().parents[2]


class _Capture(SpanProcessor):
    """Hands finished spans to the exporter only while a test of this file is running (the
    provider is process-global and stays installed for the rest of the session)."""

    def __init__(self, exporter):
        self.exporter = exporter
        self.active = False

    def on_end(self, span):
        if self.active:
            self.exporter.export([span])


_exporter = InMemorySpanExporter()
_capture = _Capture(_exporter)


@pytest.fixture
def spans():
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(_capture)
        trace.set_tracer_provider(provider)
    _exporter.clear()
    _capture.active = True

    def finished(name=None):
        return [s for s in _exporter.get_finished_spans() if name is None or s.name == name]

    yield finished
    _capture.active = False
    _exporter.clear()


@pytest.fixture
def flaky():
    calls = {"n": 0}

    def once_then_ok():
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("first attempt fails")
        return "ok"

    @workflow(name="otel-flaky")
    def flaky_wf(event, step):
        value = step.do("fetch", once_then_ok, retries={"limit": 3, "delay": "1 second"})
        step.sleep("nap", "1 minute")
        if (event.payload or {}).get("fail"):
            step.do("refuse", _refuse)
        return value

    yield
    registry.unregister("otel-flaky", 1)


def _refuse():
    raise NonRetryableError("no")


def test_a_run_and_each_step_attempt_are_spans(db, spans, flaky):
    with WorkflowHarness(start=datetime(2026, 1, 1, tzinfo=UTC)) as h:
        h.create("otel-flaky", id="i1")
        h.advance("1 second")  # the retry
        h.advance("1 minute")  # the sleep is over
    runs = spans("workflow.run")
    assert [dict(s.attributes) for s in runs][0] == {
        "workflow": "otel-flaky",
        "workflow.instance_id": "i1",
        "workflow.run_number": 1,
        "workflow.version": 1,
        "workflow.task_kind": "start",
        "workflow.outcome": "suspended",
    }
    assert [s.attributes["workflow.outcome"] for s in runs] == ["suspended"] * 2 + ["complete"]
    steps = [
        (
            s.attributes["workflow.step.name"],
            s.attributes.get("workflow.step.attempt"),
            s.attributes["workflow.step.outcome"],
            s.attributes.get("workflow.step.wait_kind"),
        )
        for s in spans("workflow.step")
    ]
    assert steps == [
        ("fetch", 1, "retrying", "retry"),
        ("fetch", 2, "complete", None),
        ("nap", None, "sleeping", "sleep"),
        ("nap", None, "complete", "sleep"),
    ]
    failed = spans("workflow.step")[0]
    assert failed.status.status_code == trace.StatusCode.ERROR
    assert failed.events[0].name == "exception"
    # Step spans are children of their run's span.
    first_run = runs[0]
    assert failed.parent.span_id == first_run.context.span_id


def test_a_failed_attempt_ends_errored(db, spans, flaky):
    with WorkflowHarness(start=datetime(2026, 1, 1, tzinfo=UTC)) as h:
        h.create("otel-flaky", id="i2", params={"fail": True})
        h.advance("1 second")
        h.advance("1 minute")
    refuse = [s for s in spans("workflow.step") if s.attributes["workflow.step.name"] == "refuse"]
    assert refuse[0].attributes["workflow.step.outcome"] == "errored"
    assert spans("workflow.run")[-1].attributes["workflow.outcome"] == "errored"


def test_the_consumer_span_links_to_the_webhook_span_by_request_id(db, spans, deliver):
    from django_q.models import OrmQ

    response = deliver(load_fixture("daily.json"), headers={"HTTP_X_REQUEST_ID": "req-otel-1"})
    assert response.status_code == 200
    (webhook,) = spans("terra.webhook")
    assert webhook.kind == trace.SpanKind.SERVER
    assert webhook.attributes["request_id"] == "req-otel-1"
    assert webhook.attributes["raw_event.id"] == response.json()["raw_event_id"]
    assert webhook.attributes["raw_event.type"] == "daily"
    assert webhook.attributes["http.response.status_code"] == 200
    # The consumer runs the queue message as django-q2 would, in another "process": the shared
    # consume task the delivery joined; the row carries the webhook span it links to.
    message = OrmQ.objects.get()
    ingest_tasks.consume_pending(*message.args(), **message.kwargs())
    (consume,) = spans("ingest.consume")
    assert consume.attributes["request_id"] == "req-otel-1"
    assert consume.attributes["raw_event.id"] == webhook.attributes["raw_event.id"]
    assert consume.attributes["raw_event.outcome"]
    assert [link.context.span_id for link in consume.links] == [webhook.context.span_id]


@pytest.mark.postgres_only
def test_outside_a_transaction_a_traced_delivery_takes_the_untraced_road_and_is_stored_once(
    transactional_db, spans, deliver
):
    """The webhook's own path in production (autocommit): tracing changes what the row records
    (the webhook span's traceparent), not how it is stored or queued."""
    from django_q.models import OrmQ

    from ingest.models import RawEvent, TraceEvent

    first = deliver(load_fixture("daily.json"))
    again = deliver(load_fixture("daily.json"))
    assert first.status_code == 200, first.content
    assert again.json() == {"ok": True, "duplicate": True}
    (row,) = RawEvent.objects.all()
    assert row.pk == first.json()["raw_event_id"]
    assert row.traceparent.startswith("00-")
    # Seen: a duplicate queued a task too; one shared consume task is queued for the row.
    (message,) = OrmQ.objects.all()
    assert message.task["func"] == "ingest.tasks.consume_pending"
    events = TraceEvent.objects.filter(raw_event=row).values_list("event", flat=True)
    assert sorted(events) == ["queue_published", "webhook_received"]


CHECK_ABSENT = """
import importlib.abc, json, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(name)
        return None

sys.meta_path.insert(0, Block())
import django
django.setup()
from django.test.utils import setup_test_environment
from ops import tracing
import ingest.webhook, ingest.consumer, ingest.queue, workflows.engine
with tracing.span("x", {"a": 1}) as span:
    tracing.set_attributes(span, {"b": 2})
print(json.dumps({
    "enabled": tracing.enabled(),
    "span": span,
    "traceparent": tracing.traceparent(),
    "links": tracing.links_from("00-" + "1" * 32 + "-" + "2" * 16 + "-01"),
    "imported": sorted(m for m in sys.modules if m.startswith("opentelemetry")),
}))
"""


def run_check(script: str, **env: str) -> dict:
    """Run `script` in a fresh interpreter (its own imports, no provider set by this session)
    and return the JSON object its last line prints."""
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={"DJANGO_SETTINGS_MODULE": "config.settings", "PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_without_the_extra_nothing_is_imported_and_spans_are_no_ops():
    assert run_check(CHECK_ABSENT) == {
        "enabled": False,
        "span": None,
        "traceparent": "",
        "links": [],
        "imported": [],
    }


CHECK_NO_PROVIDER = """
import json
import django
django.setup()
from ops import tracing
with tracing.span("x", {"a": 1}) as span:
    tracing.set_attributes(span, {"b": 2})
print(json.dumps({"enabled": tracing.enabled(), "span": span and type(span).__name__}))
"""


def test_with_the_api_but_no_sdk_configured_spans_cost_nothing():
    """The API alone would answer non-recording spans that export nothing: the runner opens
    several per run, so span() yields None until an application sets a TracerProvider."""
    assert run_check(CHECK_NO_PROVIDER) == {"enabled": False, "span": None}


CHECK_PROVIDER_SET_LATER = """
import json
import django
django.setup()
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from ops import tracing
with tracing.span("before") as before:
    pass
trace.set_tracer_provider(TracerProvider())
with tracing.span("after") as after:
    pass
print(json.dumps({"before": before, "after": type(after).__name__, "enabled": tracing.enabled()}))
"""


def test_a_provider_set_after_the_first_span_records_the_next_ones():
    """span() asks afresh each time whether a provider is set: one configured after the
    process started (an application's own setup, a test) is used from then on."""
    assert run_check(CHECK_PROVIDER_SET_LATER) == {
        "before": None,
        "after": "_Span",
        "enabled": True,
    }


def test_a_provider_named_by_the_environment_records_spans():
    """OTEL_PYTHON_TRACER_PROVIDER names a provider by its entry point, as OpenTelemetry's own
    setting: spans record with no code setting one."""
    found = run_check(CHECK_NO_PROVIDER, OTEL_PYTHON_TRACER_PROVIDER="sdk_tracer_provider")
    assert found == {"enabled": True, "span": "_Span"}
