"""GET /metrics: Prometheus text, an operator key with metrics:read (or METRICS_PUBLIC), and the
figures an on-call operator alerts on."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from ops.liveness import CLUSTER, heartbeat_beat
from ops.services import api_key_create
from tests.conftest import load_fixture, sign
from tests.factories import RawEventFactory

pytestmark = pytest.mark.django_db


def _samples(text: str) -> dict[tuple, float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.fixture
def metrics_key() -> str:
    return api_key_create(name="prometheus", scopes=["metrics:read"])[1]


def _scrape(client, raw: str) -> dict[tuple, float]:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    return _samples(response.content.decode())


def test_metrics_need_an_operator_key_with_the_metrics_scope(client):
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_X_ADMIN_KEY="vfk_unknown").status_code == 401
    _, other = api_key_create(name="ingest", scopes=["ingest:admin"])
    denied = client.get("/metrics", HTTP_X_ADMIN_KEY=other)
    assert denied.status_code == 403
    assert denied.json()["code"] == "permission_denied"
    _, scoped = api_key_create(name="prom", scopes=["metrics:read"])
    assert client.get("/metrics", HTTP_X_ADMIN_KEY=scoped).status_code == 200
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {scoped}").status_code == 200


def test_metrics_are_public_when_configured(client, settings):
    settings.METRICS_PUBLIC = True
    assert client.get("/metrics").status_code == 200


def test_metrics_report_unfinished_raw_events_dlq_and_oldest_pending_age(client, metrics_key):
    RawEventFactory(event_type="sleep", received_at=timezone.now() - timedelta(minutes=10))
    RawEventFactory(event_type="sleep")
    RawEventFactory(event_type="daily", state="dead")
    RawEventFactory(event_type="daily", state="processed")
    samples = _scrape(client, metrics_key)
    assert samples[("vitalflow_raw_events", (("state", "pending"), ("type", "sleep")))] == 2
    assert samples[("vitalflow_raw_events", (("state", "dead"), ("type", "daily")))] == 1
    assert samples[("vitalflow_dlq_size", ())] == 1
    assert samples[("vitalflow_oldest_pending_seconds", ())] >= 600


def test_metrics_count_webhook_requests_by_status_with_latency(client, metrics_key):
    before = _scrape(client, metrics_key)
    body = json.dumps(load_fixture("daily.json")).encode()
    client.post(
        "/webhook/terra", body, content_type="application/json", HTTP_TERRA_SIGNATURE=sign(body)
    )
    client.post("/webhook/terra", b"{}", content_type="application/json")  # unsigned: 401
    after = _scrape(client, metrics_key)

    def grew(key):
        return after.get(key, 0) - before.get(key, 0)

    assert grew(("vitalflow_webhook_requests_total", (("status", "200"),))) == 1
    assert grew(("vitalflow_webhook_requests_total", (("status", "401"),))) == 1
    assert grew(("vitalflow_webhook_request_seconds_count", ())) == 2
    assert grew(("vitalflow_raw_events_received_total", (("type", "daily"),))) == 1


def test_metrics_count_consumer_outcomes(client, metrics_key):
    from ingest.consumer import raw_event_consume

    row = RawEventFactory(event_type="athlete", payload={"type": "athlete"})
    before = _scrape(client, metrics_key)
    raw_event_consume(row.pk)
    after = _scrape(client, metrics_key)
    key = ("vitalflow_consumer_rows_total", (("state", "skipped"), ("type", "athlete")))
    assert after[key] - before.get(key, 0) == 1


def test_metrics_report_workflows_and_live_workers(client, metrics_key, settings):
    from workflows.models import Status, TaskKind, WorkflowInstance, WorkflowTask

    settings.HEARTBEAT_SECONDS = 15
    heartbeat_beat(kind=CLUSTER, pid=5, host="a")
    now = timezone.now()
    common = {"workflow_name": "wf", "version": 1, "created_at": now, "updated_at": now}
    WorkflowInstance.objects.create(instance_id="e", status=Status.ERRORED, **common)
    waiting = WorkflowInstance.objects.create(instance_id="w", status=Status.WAITING, **common)
    WorkflowTask.objects.create(
        instance=waiting,
        run_number=1,
        kind=TaskKind.WAKE,
        priority=0,
        run_at=now - timedelta(minutes=3),
        created_at=now,
    )
    samples = _scrape(client, metrics_key)
    assert samples[("vitalflow_workflow_instances", (("status", "waiting"),))] == 1
    assert samples[("vitalflow_workflow_instances", (("status", "errored"),))] == 1
    assert samples[("vitalflow_workflow_tasks_due", ())] == 1
    assert samples[("vitalflow_workflow_tasks_overdue", ())] == 1
    assert samples[("vitalflow_workflow_waits_overdue", ())] == 1
    assert samples[("vitalflow_workflow_wake_lag_seconds", ())] >= 180
    assert samples[("vitalflow_workers_live", (("kind", "cluster"),))] == 1
    assert samples[("vitalflow_workers_live", (("kind", "runner"),))] == 0
    assert samples[("vitalflow_workers_stuck", (("kind", "cluster"),))] == 0


def test_metrics_count_a_stuck_cluster(client, metrics_key, settings):
    settings.HEARTBEAT_SECONDS = 15
    heartbeat_beat(kind=CLUSTER, pid=6, host="a")
    RawEventFactory(received_at=timezone.now() - timedelta(minutes=10))  # waits; nothing finished
    samples = _scrape(client, metrics_key)
    assert samples[("vitalflow_workers_live", (("kind", "cluster"),))] == 1
    assert samples[("vitalflow_workers_stuck", (("kind", "cluster"),))] == 1
