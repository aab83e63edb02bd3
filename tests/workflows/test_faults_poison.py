"""A poison instance stops being reclaimed (item 3): every claim that ends without
progress counts; at WORKFLOWS_MAX_RECOVERY_ATTEMPTS the next claim errors the instance with
MaxRecoveryAttemptsExceeded instead of running it again."""

import signal
from datetime import timedelta

import pytest

from tests.workflows.fault_processes import Runners, marks, wait_for
from tests.workflows.fault_workflows import RunnerDied
from workflows import services
from workflows.models import WorkflowInstance, WorkflowStep, WorkflowTask

LEASE_LAPSED = timedelta(seconds=31)  # WORKFLOWS_LEASE_SECONDS is 30 in tests


def die_in_step(harness, instance_id: str) -> None:
    """One claim whose runner dies mid-step; the clock then moves past its lease."""
    with pytest.raises(RunnerDied):
        harness.tick()
    harness.runtime.advance(LEASE_LAPSED)


def test_a_run_that_kills_its_runner_is_errored_once_the_limit_is_reached(harness, settings):
    settings.WORKFLOWS_MAX_RECOVERY_ATTEMPTS = 3
    harness.create(
        "fault-dies-in-steps", "p", {"steps": ["ok", "boom"], "deaths": {"boom": 99}}, run=False
    )
    die_in_step(harness, "p")  # step "ok" completed first: this claim made progress
    for _ in range(3):
        die_in_step(harness, "p")  # three claims in a row without progress
    assert harness.tick() == "errored"  # the next claim runs no workflow code
    instance = harness.instance("fault-dies-in-steps", "p")
    assert instance.error["name"] == "MaxRecoveryAttemptsExceeded"
    assert "'boom'" in instance.error["message"]
    boom = WorkflowStep.objects.get(instance=instance, name="boom")
    assert (boom.status, boom.attempts, boom.error["name"]) == (
        "errored",
        4,
        "MaxRecoveryAttemptsExceeded",
    )
    assert not WorkflowTask.objects.filter(instance=instance).exists()


def test_progress_resets_the_count(harness, settings):
    """Each of four steps kills its runner once: 4 deaths in all, never 3 in a row."""
    settings.WORKFLOWS_MAX_RECOVERY_ATTEMPTS = 2
    steps = ["a", "b", "c", "d"]
    harness.create(
        "fault-dies-in-steps", "r", {"steps": steps, "deaths": dict.fromkeys(steps, 1)}, run=False
    )
    for _ in steps:
        die_in_step(harness, "r")
    harness.run_until_idle()
    assert harness.instance("fault-dies-in-steps", "r").status == "complete"


def test_restart_gives_a_crash_looping_instance_a_fresh_count(harness, settings):
    settings.WORKFLOWS_MAX_RECOVERY_ATTEMPTS = 1
    harness.create(
        "fault-dies-in-steps", "x", {"steps": ["boom"], "deaths": {"boom": 99}}, run=False
    )
    die_in_step(harness, "x")
    assert harness.tick() == "errored"
    harness.restart("fault-dies-in-steps", "x", run=False)
    instance = harness.instance("fault-dies-in-steps", "x")
    assert instance.status == "active"
    assert WorkflowTask.objects.get(instance=instance).recovery_attempts == 0
    die_in_step(harness, "x")  # the new run gets its own attempt before it is stopped
    assert harness.tick() == "errored"


def test_a_crash_looped_instance_shows_in_the_consoles_errored_filter(
    harness, settings, admin_client
):
    settings.WORKFLOWS_MAX_RECOVERY_ATTEMPTS = 1
    harness.create(
        "fault-dies-in-steps", "c", {"steps": ["boom"], "deaths": {"boom": 99}}, run=False
    )
    die_in_step(harness, "c")
    harness.tick()
    page = admin_client.get("/admin/workflows/workflowinstance/", {"status__exact": "errored"})
    assert page.status_code == 200
    assert b">c<" in page.content or b"/c/" in page.content


@pytest.mark.postgres_only
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_step_that_sigkills_its_runner_ends_errored_with_real_processes(tmp_path):
    """Runners are restarted as they die, until the instance is errored (limit 3 here)."""
    runners = Runners(tmp_path)
    trace = tmp_path / "trace"
    services.instance_create(
        workflow_name="fault-suicide", instance_id="poison", params={"trace": str(trace)}
    )
    try:
        for _ in range(10):
            if WorkflowInstance.objects.get(instance_id="poison").status == "errored":
                break
            proc = runners.start(lease=1, env={"WORKFLOWS_MAX_RECOVERY_ATTEMPTS": "3"})
            wait_for(
                lambda proc=proc: (
                    proc.poll() is not None
                    or WorkflowInstance.objects.get(instance_id="poison").status == "errored"
                ),
                what="the runner to die or the instance to be errored",
            )
            if proc.poll() is not None:
                assert proc.returncode == -signal.SIGKILL
    finally:
        runners.stop_all()
    instance = WorkflowInstance.objects.get(instance_id="poison")
    assert instance.status == "errored"
    assert instance.error["name"] == "MaxRecoveryAttemptsExceeded"
    assert "'deadly'" in instance.error["message"]
    deaths = [m for _, m, _, pid in marks(trace) if m == "deadly"]
    # The first claim completed step "fine" (progress); 3 more in a row without, then stopped.
    assert len(deaths) == 4
