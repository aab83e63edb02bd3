"""Recovery from the console: the instance page's retry now / skip wait buttons and its step
picker with a confirmation listing what runs again; "… all matching" on the instance and raw
event lists (filter → count → confirmation → a job whose page shows its progress)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from ingest.models import RawEvent
from ops.bulk import bulk_job_run
from ops.models import AuditLog, BulkJob
from tests.factories import RawEventFactory
from tests.workflows import test_recovery_actions as flows
from tests.workflows.test_http_support import READ  # noqa: F401 - registers the h5-* workflows
from workflows.models import WorkflowInstance

CHANGELIST = "/admin/workflows/workflowinstance/"


@pytest.fixture
def console(client, staff):
    client.force_login(staff)
    return client


@pytest.fixture(autouse=True)
def _fresh_calls():
    flows.CALLS.clear()


def page_of(name: str, instance_id: str) -> str:
    pk = WorkflowInstance.objects.get(workflow_name=name, instance_id=instance_id).pk
    return f"{CHANGELIST}{pk}/change/"


def test_an_instance_in_backoff_offers_retry_now_and_the_button_runs_it(console, harness):
    harness.create("t-recover-backoff", id="b1", params={"key": "b1"})
    page = page_of("t-recover-backoff", "b1")
    content = console.get(page).content.decode()
    assert 'value="Retry now"' in content and 'value="Skip wait"' not in content
    pk = WorkflowInstance.objects.get(instance_id="b1").pk
    response = console.post(f"{CHANGELIST}{pk}/do/retry_now/", follow=True)
    assert "Retry now: 1 instance" in response.content.decode()
    harness.run_until_idle()
    assert harness.status("t-recover-backoff", "b1")["status"] == "complete"
    assert AuditLog.objects.get(action="workflow_instance.retry_now").actor == "user:charlie"


def test_a_sleeping_instance_offers_skip_wait(console, harness):
    harness.create("t-recover-sleep", id="s1", params={})
    content = console.get(page_of("t-recover-sleep", "s1")).content.decode()
    assert 'value="Skip wait"' in content and 'value="Retry now"' not in content
    pk = WorkflowInstance.objects.get(instance_id="s1").pk
    console.post(f"{CHANGELIST}{pk}/do/skip_wait/")
    harness.run_until_idle()
    assert harness.status("t-recover-sleep", "s1")["status"] == "complete"


def test_skip_wait_on_an_instance_that_is_not_sleeping_says_why(console, harness):
    harness.create("t-recover-backoff", id="b1", params={"key": "b1"})
    pk = WorkflowInstance.objects.get(instance_id="b1").pk
    response = console.post(f"{CHANGELIST}{pk}/do/skip_wait/", follow=True)
    assert "Skip wait refused: not_sleeping" in response.content.decode()


def test_rerun_from_a_step_lists_what_runs_again_before_doing_it(console, harness):
    harness.create("t-recover-steps", id="r1", params={"key": "r1"})
    pk = WorkflowInstance.objects.get(instance_id="r1").pk
    content = console.get(page_of("t-recover-steps", "r1")).content.decode()
    assert 'id="rerun-from-step"' in content and '<option value="b">b</option>' in content

    confirm = console.get(f"{CHANGELIST}{pk}/rerun/?from_step=b").content.decode()
    assert "<td>b</td>" in confirm and "<td>c</td>" in confirm and "<td>a</td>" not in confirm
    assert WorkflowInstance.objects.get(pk=pk).run_number == 1  # nothing happened yet

    console.post(f"{CHANGELIST}{pk}/rerun/", {"from_step": "b", "confirm": "yes"})
    harness.run_until_idle()
    assert WorkflowInstance.objects.get(pk=pk).run_number == 2
    assert [flows.CALLS[f"r1:{s}"] for s in "abc"] == [1, 2, 2]
    assert AuditLog.objects.get(action="workflow_instance.restart").metadata == {"from_step": "b"}


def test_rerun_from_an_unknown_step_changes_nothing(console, harness):
    harness.create("t-recover-steps", id="r1", params={"key": "r1"})
    pk = WorkflowInstance.objects.get(instance_id="r1").pk
    response = console.get(f"{CHANGELIST}{pk}/rerun/?from_step=nope", follow=True)
    assert "has no step named" in response.content.decode()
    assert WorkflowInstance.objects.get(pk=pk).run_number == 1


def test_restart_all_matching_counts_first_then_runs_a_job_with_progress(console, harness):
    for n in range(3):
        harness.create("h5-fail", id=f"e{n}")
    harness.create("h5-approval", id="w1")
    content = console.get(CHANGELIST + "?workflow_name=h5-fail").content.decode()
    assert "Restart all matching" in content

    # The list's filters arrive renamed to the bulk form's fields.
    start = "/admin/workflows/workflowinstance/bulk/restart/"
    response = console.get(f"{start}?workflow_name=h5-fail&status__exact=errored&age=1h")
    assert response.status_code == 302
    counted = console.get(response["Location"]).content.decode()
    assert "<strong>3</strong> workflow instances match" in counted
    assert not BulkJob.objects.exists()

    done = console.post(
        start,
        {"workflow": "h5-fail", "status": ["errored"], "newer_than": "1h", "confirm": "yes"},
    )
    job = BulkJob.objects.get()
    assert done["Location"] == f"/admin/ops/bulkjob/{job.pk}/change/"
    assert "0/3" in console.get(done["Location"]).content.decode()
    bulk_job_run(job.pk)
    progress = console.get(done["Location"]).content.decode()
    assert '<span id="bulk-progress">3/3</span>' in progress and "finished" in progress
    assert AuditLog.objects.filter(action="workflow_instance.bulk_restart").count() == 1
    assert not AuditLog.objects.filter(action="workflow_instance.restart").exists()


def test_replay_all_matching_raw_events_from_the_dlq_list(console):
    since = timezone.now() - timedelta(hours=1)
    RawEventFactory.create_batch(4, event_type="sleep", state="dead", received_at=timezone.now())
    RawEventFactory.create_batch(2, event_type="daily", state="dead", received_at=timezone.now())
    lst = console.get("/admin/ingest/rawevent/?state__exact=dead&event_type=sleep")
    assert "Replay all matching" in lst.content.decode()

    start = "/admin/ingest/rawevent/bulk-replay/"
    redirect = console.get(f"{start}?state__exact=dead&event_type=sleep")
    counted = console.get(redirect["Location"]).content.decode()
    assert "<strong>4</strong> raw events match" in counted

    done = console.post(
        start, {"state": ["dead"], "type": "sleep", "since": since.isoformat(), "confirm": "yes"}
    )
    job = BulkJob.objects.get()
    bulk_job_run(job.pk)
    assert "4/4" in console.get(done["Location"]).content.decode()
    assert RawEvent.objects.filter(state="dead").count() == 2
    assert AuditLog.objects.get(action="raw_events.bulk_replay").result == "ok"


def test_a_bad_filter_on_the_bulk_page_says_so_and_starts_nothing(console):
    response = console.get("/admin/ingest/rawevent/bulk-replay/?since=whenever")
    assert "invalid_filter" in response.content.decode()
    assert not BulkJob.objects.exists()
