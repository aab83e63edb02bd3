"""Bulk actions chosen by a filter, not by ticking rows: "replay every dead raw event of type
sleep since 02:00", "restart every errored lab-report of the last hour". The count comes before
the confirmation; the work runs as a tracked job (ops.BulkJob) with its progress stored; the
whole job writes ONE audit row (the filter and the counts, never a value)."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from ingest.actions import do_raw_events_bulk_replay
from ingest.models import RawEvent
from ops.bulk import bulk_job_run
from ops.models import AuditLog, BulkJob
from tests.factories import RawEventFactory
from tests.workflows.test_http_support import ALL_SCOPES
from workflows.models import WorkflowInstance

BULK = "/v1/workflows/h5-fail/instances/bulk"


@pytest.fixture
def ops_api(operator_api):
    return operator_api(*ALL_SCOPES, name="oncall")


@pytest.fixture
def errored(harness):
    """Three errored h5-fail instances created now, one created two hours ago."""
    harness.create("h5-fail", id="old")
    harness.runtime.advance(timedelta(hours=2))
    for n in range(3):
        harness.create("h5-fail", id=f"e{n}")
    assert WorkflowInstance.objects.filter(status="errored").count() == 4


def test_a_dry_run_counts_what_the_filter_matches_and_starts_nothing(ops_api, errored):
    body = {"filter": {"status": ["errored"], "newer_than": "1h"}, "dry_run": True}
    response = ops_api.post(f"{BULK}/restart", body, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["count"] == 3
    assert not BulkJob.objects.exists() and not AuditLog.objects.exists()


def test_restart_every_errored_instance_of_the_last_hour_runs_as_one_audited_job(
    ops_api, errored, harness
):
    body = {"filter": {"status": ["errored"], "newer_than": "1h"}}
    response = ops_api.post(f"{BULK}/restart", body, format="json")
    assert response.status_code == 202, response.json()
    job = response.json()
    assert (job["state"], job["total"], job["done"]) == ("queued", 3, 0)

    bulk_job_run(job["id"])  # what the cluster's task does

    progress = ops_api.get(f"/v1/workflows/_bulk/{job['id']}").json()
    assert (progress["state"], progress["done"], progress["failed"]) == ("finished", 3, 0)
    runs = dict(WorkflowInstance.objects.values_list("instance_id", "run_number"))
    assert runs == {"old": 1, "e0": 2, "e1": 2, "e2": 2}
    [row] = AuditLog.objects.all()
    assert (row.action, row.result, row.resource) == (
        "workflow_instance.bulk_restart",
        "ok",
        f"bulk_job:{job['id']}",
    )
    assert row.metadata["total"] == row.metadata["done"] == 3
    assert row.metadata["filter"]["workflow"] == "h5-fail"
    assert row.actor.startswith("api_key:")


def test_a_bulk_job_is_handed_to_the_cluster_after_commit_and_its_task_runs_it(
    ops_api, harness, django_capture_on_commit_callbacks
):
    from django.utils.module_loading import import_string
    from django_q.models import OrmQ
    from django_q.signing import SignedPackage

    harness.create("h5-approval", id="live")
    with django_capture_on_commit_callbacks(execute=True):
        response = ops_api.post(
            "/v1/workflows/h5-approval/instances/bulk/pause", {"filter": {}}, format="json"
        )
    [message] = OrmQ.objects.all()
    task = SignedPackage.loads(message.payload)
    assert (task["func"], task["args"]) == ("ops.bulk.bulk_job_run", (response.json()["id"],))
    import_string(task["func"])(*task["args"])  # what a cluster worker does with it
    assert WorkflowInstance.objects.get(instance_id="live").status == "paused"
    assert BulkJob.objects.get().state == "finished"


def test_terminate_matches_only_instances_it_applies_to(ops_api, errored, harness):
    harness.create("h5-approval", id="live")
    response = ops_api.post(
        "/v1/workflows/h5-approval/instances/bulk/terminate", {"filter": {}}, format="json"
    )
    job = response.json()
    assert job["total"] == 1
    bulk_job_run(job["id"])
    assert WorkflowInstance.objects.get(instance_id="live").status == "terminated"
    assert WorkflowInstance.objects.get(instance_id="e0").status == "errored"


@pytest.mark.parametrize(
    ("path", "body", "code"),
    [
        ("restart", {"filter": {"status": ["sideways"]}}, "invalid_filter"),
        ("restart", {"filter": {"since": "yesterday-ish"}}, "invalid_filter"),
        ("restart", {"filter": {"newer_than": "soon"}}, "invalid_filter"),
        ("explode", {"filter": {}}, "invalid_filter"),
        ("restart", {"filter": "errored"}, "invalid_request"),
    ],
)
def test_a_bad_bulk_request_is_a_400_with_a_code(ops_api, errored, path, body, code):
    response = ops_api.post(f"{BULK}/{path}", body, format="json")
    assert (response.status_code, response.json()["code"]) == (400, code)
    assert not BulkJob.objects.exists()


def test_a_bulk_action_needs_the_manage_scope(operator_api, errored):
    reader = operator_api("workflows:read")
    response = reader.post(f"{BULK}/restart", {"filter": {}}, format="json")
    assert response.status_code == 403


def test_an_unknown_bulk_job_is_404(ops_api, db):
    response = ops_api.get("/v1/workflows/_bulk/999")
    assert (response.status_code, response.json()["code"]) == (404, "bulk_job_not_found")


def test_the_command_runs_a_bulk_restart_on_the_box(errored, capsys):
    call_command(
        "workflows", "bulk", "restart", "--workflow", "h5-fail", "--status", "errored",
        "--newer-than", "1h",
    )  # fmt: skip
    assert "finished, 3 done, 0 failed of 3" in capsys.readouterr().out
    assert AuditLog.objects.get().actor == "system:manage.py"


def _dead(n: int, *, event_type: str, received_at) -> None:
    RawEventFactory.create_batch(
        n, event_type=event_type, state="dead", attempts=5, received_at=received_at
    )


def test_replay_every_dead_sleep_event_since_two_finishes_250_of_250_with_one_audit_row(db):
    two = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    _dead(250, event_type="sleep", received_at=two + timedelta(minutes=5))
    _dead(7, event_type="sleep", received_at=two - timedelta(minutes=5))  # before 02:00
    _dead(5, event_type="daily", received_at=two + timedelta(minutes=5))  # another type
    RawEventFactory.create_batch(3, event_type="sleep", state="processed", received_at=two)

    job = do_raw_events_bulk_replay(
        filters={"state": ["dead"], "type": "sleep", "since": two.isoformat()}, actor="user:ann"
    )
    assert (job.total, job.state) == (250, "queued")
    job = bulk_job_run(job.pk, chunk_size=100)

    assert (job.state, job.done, job.failed, job.total) == ("finished", 250, 0, 250)
    assert RawEvent.objects.filter(event_type="sleep", state="pending").count() == 250
    assert RawEvent.objects.filter(state="dead").count() == 12
    [row] = AuditLog.objects.all()
    assert (row.action, row.result, row.actor) == ("raw_events.bulk_replay", "ok", "user:ann")
    assert {k: row.metadata[k] for k in ("total", "done", "failed", "state")} == {
        "total": 250,
        "done": 250,
        "failed": 0,
        "state": "finished",
    }
    assert set(row.metadata) == {"job", "kind", "filter", "total", "done", "failed", "state"}


def test_a_replay_filter_must_say_which_rows(db):
    from ingest.errors import InvalidFilter

    with pytest.raises(InvalidFilter):
        do_raw_events_bulk_replay(filters={}, actor="x")


RAW_BULK = "/v1/admin/raw-events/bulk-replay"


def test_the_operator_api_counts_then_replays_dead_events_by_filter(operator_api):
    ingest_api = operator_api("ingest:admin")
    _dead(3, event_type="sleep", received_at=timezone.now())
    _dead(2, event_type="daily", received_at=timezone.now())
    body = {"filter": {"state": ["dead"], "type": "sleep", "newer_than": "1h"}, "dry_run": True}
    assert ingest_api.post(RAW_BULK, body, format="json").json()["count"] == 3

    response = ingest_api.post(RAW_BULK, {"filter": body["filter"]}, format="json")
    assert response.status_code == 202, response.json()
    job = response.json()
    bulk_job_run(job["id"])
    progress = ingest_api.get(f"/v1/admin/bulk-jobs/{job['id']}").json()
    assert (progress["state"], progress["done"], progress["total"]) == ("finished", 3, 3)
    assert AuditLog.objects.get(action="raw_events.bulk_replay").actor.startswith("api_key:")


@pytest.mark.parametrize(
    "body",
    [{"filter": {}}, {"filter": {"state": ["sideways"]}}, {"filter": {"since": "noonish"}}],
)
def test_a_bad_replay_filter_is_400_invalid_filter(operator_api, body):
    response = operator_api("ingest:admin").post(RAW_BULK, body, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_filter")


def test_a_replay_job_of_another_kind_is_not_found_there(operator_api, ops_api, errored):
    job = ops_api.post(f"{BULK}/restart", {"filter": {}}, format="json").json()
    response = operator_api("ingest:admin").get(f"/v1/admin/bulk-jobs/{job['id']}")
    assert (response.status_code, response.json()["code"]) == (404, "bulk_job_not_found")


def test_the_replay_command_takes_a_filter_and_runs_the_job_here(db, capsys):
    _dead(4, event_type="sleep", received_at=timezone.now())
    call_command("terra_replay", "--state", "dead", "--type", "sleep", "--dry-run")
    assert "would replay 4 raw event(s)" in capsys.readouterr().out
    call_command("terra_replay", "--state", "dead", "--type", "sleep", "--newer-than", "1h")
    assert "finished, replayed 4 of 4" in capsys.readouterr().out
    assert AuditLog.objects.get().actor == "command:terra_replay"
