"""Retention and GC with the harness on SQLite and PostgreSQL: finished instances
past their workflow's retention (or the project default) go with their steps, events, logs and
tasks, in batches; everything else stays; `manage.py workflows gc [--dry-run]`, the daily
schedule with its audit row, and log pruning of kept instances."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command

from ops import schedules
from ops.models import AuditLog
from tests.workflows.test_http_support import READ
from workflows import gc, tasks
from workflows.models import (
    WorkflowEvent,
    WorkflowInstance,
    WorkflowLog,
    WorkflowStep,
)


def ids(name: str | None = None) -> list[str]:
    qs = WorkflowInstance.objects.all()
    if name:
        qs = qs.filter(workflow_name=name)
    return sorted(qs.values_list("instance_id", flat=True))


@pytest.fixture
def finished(harness, retention_fleet):
    """gc-kept at 12:00: c1 complete, e1 errored, t1 terminated, w1 waiting for an event."""
    harness.create("gc-kept", id="c1")
    harness.create("gc-kept", id="e1", params={"fail": True})
    harness.create("gc-kept", id="t1", params={"wait": True})
    harness.create("gc-kept", id="w1", params={"wait": True})
    harness.run_until_idle()
    harness.send_event("gc-kept", "t1", "go", run=False)  # an event row that must go too
    harness.terminate("gc-kept", "t1")
    return harness


def test_finished_instances_past_retention_go_with_their_steps_events_and_logs(finished):
    c1 = WorkflowInstance.objects.get(instance_id="c1")
    assert WorkflowStep.objects.filter(instance=c1).exists()
    assert WorkflowLog.objects.filter(instance=c1).exists()
    finished.runtime.advance(timedelta(days=30, seconds=1))
    report = gc.gc_run()
    assert report.instances == {("gc-kept", "complete"): 1}
    assert ids() == ["e1", "t1", "w1"]  # errored keeps 90 days; terminated has no retention
    assert not WorkflowStep.objects.filter(instance_id=c1.pk).exists()
    assert not WorkflowLog.objects.filter(instance_id=c1.pk).exists()
    assert report.rows["instances"] == 1 and report.rows["steps"] == 2
    finished.runtime.advance(timedelta(days=60))
    assert gc.gc_run().instances == {("gc-kept", "errored"): 1}
    assert ids() == ["t1", "w1"]


def test_nothing_goes_before_its_retention_and_unfinished_instances_never(finished, settings):
    settings.WORKFLOWS_RETENTION = {"terminated": "1 day", "complete": "1 day"}
    finished.runtime.advance(timedelta(days=29))
    report = gc.gc_run()
    # The workflow's own 30 days for complete wins over the default's 1 day; terminated takes
    # the default. The waiting instance is a year old at the end and still there.
    assert report.instances == {("gc-kept", "terminated"): 1}
    assert not WorkflowEvent.objects.filter(instance__instance_id="t1").exists()
    finished.runtime.advance(timedelta(days=365))
    gc.gc_run()
    assert ids() == ["w1"]


def test_the_project_default_applies_to_workflows_without_their_own(
    harness, retention_fleet, settings
):
    harness.create("gc-default", id="d1")
    harness.create("noop3", id="n1")
    harness.run_until_idle()
    harness.runtime.advance(timedelta(days=400))
    assert gc.gc_run().instances == {}  # unset: kept forever
    settings.WORKFLOWS_RETENTION = {"complete": "7 days"}
    report = gc.gc_run()
    assert report.instances == {("gc-default", "complete"): 1, ("noop3", "complete"): 1}
    assert ids("gc-default") == [] and ids("noop3") == []


def test_deletion_goes_in_batches_until_nothing_is_left(harness, retention_fleet):
    for n in range(7):
        harness.create("gc-kept", id=f"c{n}")
    harness.run_until_idle()
    harness.runtime.advance(timedelta(days=31))
    report = gc.gc_run(batch_size=2)
    assert report.instances == {("gc-kept", "complete"): 7}
    assert ids() == []


def test_an_instance_restarted_after_selection_is_not_deleted(finished):
    finished.runtime.advance(timedelta(days=31))
    target = next(t for t in gc.targets(finished.now()) if t.status == "complete")
    selected = list(gc.expired(target).values_list("id", flat=True))
    finished.restart("gc-kept", "c1", run=False)  # an operator, between selection and delete
    assert gc._delete_batch(target, selected) == {}
    assert WorkflowInstance.objects.get(instance_id="c1").status == "active"


def test_dry_run_prints_what_would_go_and_deletes_nothing(finished, settings):
    settings.WORKFLOWS_LOG_RETENTION = timedelta(days=10)
    finished.runtime.advance(timedelta(days=31))
    c1_logs = WorkflowLog.objects.filter(instance__instance_id="c1").count()
    all_logs = WorkflowLog.objects.count()
    out = io.StringIO()
    call_command("workflows", "gc", "--dry-run", stdout=out)
    text = out.getvalue()
    assert "gc-kept  complete older than 30 days: would delete 1 instance(s)\n" in text
    assert "gc-kept  errored older than 90 days: would delete 0 instance(s)\n" in text
    assert f"total: would delete instances 1, logs {c1_logs}, steps 2\n" in text
    assert f"log lines older than 10 days: would delete {all_logs}\n" in text
    assert ids() == ["c1", "e1", "t1", "w1"]
    assert not AuditLog.objects.filter(action="workflows.gc").exists()


def test_the_command_deletes_and_audits_the_counts(finished):
    finished.runtime.advance(timedelta(days=31))
    out = io.StringIO()
    call_command("workflows", "gc", stdout=out)
    assert "gc-kept  complete older than 30 days: deleted 1 instance(s)\n" in out.getvalue()
    row = AuditLog.objects.get(action="workflows.gc")
    assert row.actor == "system:manage.py"
    assert row.metadata["instances"] == {"gc-kept/complete": 1}


def test_without_any_retention_the_command_says_everything_is_kept(harness):
    out = io.StringIO()
    call_command("workflows", "gc", "--dry-run", stdout=out)
    assert "no retention configured: finished instances are kept forever\n" in out.getvalue()


def test_log_lines_of_kept_instances_past_log_retention_are_pruned(finished, settings):
    finished.runtime.advance(timedelta(days=2))
    finished.send_event("gc-kept", "w1", "go")  # w1 completes now: its newer lines stay
    settings.WORKFLOWS_LOG_RETENTION = timedelta(days=1)
    old = WorkflowLog.objects.filter(created_at__lt=finished.now() - timedelta(days=1))
    old_ids = set(old.values_list("id", flat=True))
    assert old_ids and WorkflowLog.objects.count() > len(old_ids)
    report = gc.gc_run()
    assert report.instances == {}
    assert report.log_lines_pruned == len(old_ids)  # the 12:00 lines of c1, e1, t1, w1
    assert not WorkflowLog.objects.filter(id__in=old_ids).exists()
    assert set(WorkflowLog.objects.values_list("instance__instance_id", flat=True)) == {"w1"}
    assert ids() == ["c1", "e1", "t1", "w1"]


def test_the_daily_schedule_runs_gc_and_audits_it(finished):
    spec = next(s for s in schedules.schedule_specs() if s.name == "workflows-gc")
    assert (spec.func, spec.schedule_type, spec.at.hour) == ("workflows.tasks.gc", "D", 4)
    finished.runtime.advance(timedelta(days=31))
    summary = tasks.gc()
    assert summary["instances"] == {"gc-kept/complete": 1}
    assert summary["rows"]["steps"] == 2
    row = AuditLog.objects.get(action="workflows.gc")
    assert (row.actor, row.metadata) == ("system:gc", summary)


def test_get_workflow_shows_the_retention_in_force(operator_api, retention_fleet, settings):
    settings.WORKFLOWS_RETENTION = {"terminated": "7 days", "complete": "1 day"}
    body = operator_api(READ).get("/v1/workflows/gc-kept").json()
    assert body["retention"] == {
        "complete": "30 days",
        "errored": "90 days",
        "terminated": "7 days",
    }


def test_the_retention_setting_parses_the_project_grammar(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from config.settings import env_retention

    monkeypatch.setenv("R", "30 days")
    assert env_retention("R") == dict.fromkeys(
        ("complete", "errored", "terminated"), timedelta(days=30)
    )
    monkeypatch.setenv("R", "complete=2w, errored=90 days")
    assert env_retention("R") == {"complete": timedelta(weeks=2), "errored": timedelta(days=90)}
    for bad in ("30", "paused=1d", "complete=1 month"):
        monkeypatch.setenv("R", bad)
        with pytest.raises(ImproperlyConfigured):
            env_retention("R")
    monkeypatch.delenv("R")
    assert env_retention("R") is None


def test_labels_go_with_their_instance(harness, retention_fleet):
    harness.create("gc-kept", id="l1", labels={"team": "labs"})
    harness.runtime.advance(timedelta(days=31))
    report = gc.gc_run()
    assert report.rows["labels"] == 1 and report.rows["instances"] == 1
    assert ids() == []
