"""The runner in-process: claim order, leases and fencing, lease renewal, wake tasks, command."""

import io
import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection

from workflows import runtime, services, tasks, workflow
from workflows.decisions import DISCARD
from workflows.engine import persist, run_one, tick
from workflows.engine.claim import claim_next
from workflows.engine.execute import execute
from workflows.models import WorkflowInstance, WorkflowStep, WorkflowTask


@workflow(name="t-slow-step")
def slow_step(event, step):
    step.do("slow", lambda: time.sleep(event.payload["seconds"]) or "slept")
    return step.do("after", lambda: "after")


def test_claims_take_resume_wake_retry_before_new_runs_then_oldest_first(harness):
    harness.create("t-slow-step", id="new-old", params={"seconds": 0}, run=False)
    harness.runtime.advance(timedelta(seconds=1))
    harness.create("t-slow-step", id="new-young", params={"seconds": 0}, run=False)
    services.instance_create(workflow_name="sleepy", instance_id="sleeper")
    # Let only the sleeper run: it suspends with a wake task due in 1 s.
    WorkflowTask.objects.exclude(instance__instance_id="sleeper").update(run_at=None)
    harness.run_until_idle()
    WorkflowTask.objects.filter(run_at__isnull=True).update(
        run_at=harness.now() - timedelta(hours=1)
    )
    harness.runtime.advance(timedelta(seconds=2))
    order = []
    while (got := claim_next(owner="o", lease_seconds=30)) is not None:
        claim, loaded = got
        order.append((loaded.instance_id, claim.kind))
        WorkflowTask.objects.filter(pk=claim.task_pk).update(run_at=None)
    assert order == [("sleeper", "wake"), ("new-old", "start"), ("new-young", "start")]


def test_paused_and_terminal_instances_are_never_claimed(harness):
    services.instance_create(workflow_name="noop3", instance_id="p")
    services.instance_create(workflow_name="noop3", instance_id="t")
    harness.pause("noop3", "p")
    harness.terminate("noop3", "t")
    assert claim_next(owner="o", lease_seconds=30) is None


def test_a_runner_whose_lease_expired_and_was_reclaimed_writes_nothing(harness):
    services.instance_create(workflow_name="noop3", instance_id="f")
    stale, stale_loaded = claim_next(owner="stale", lease_seconds=30)
    harness.runtime.advance(timedelta(seconds=31))  # the stale runner stalls past its lease
    fresh, fresh_loaded = claim_next(owner="fresh", lease_seconds=30)
    assert fresh.task_pk == stale.task_pk and fresh.fencing_token == stale.fencing_token + 1
    assert execute(stale, stale_loaded, threaded=False) == "halted"
    assert WorkflowStep.objects.count() == 0
    assert persist.commit(stale, persist.Pending(), persist.Finish("x")) == DISCARD
    assert execute(fresh, fresh_loaded, threaded=False) == "complete"
    assert set(WorkflowStep.objects.values_list("fencing_token", flat=True)) == {
        fresh.fencing_token
    }


def test_an_expired_lease_is_not_written_even_when_nobody_reclaimed_it(harness):
    services.instance_create(workflow_name="noop3", instance_id="e")
    claim, loaded = claim_next(owner="late", lease_seconds=30)
    harness.runtime.advance(timedelta(seconds=30))
    assert execute(claim, loaded, threaded=False) == "halted"
    assert WorkflowInstance.objects.get(instance_id="e").status == "active"
    harness.run_until_idle()  # reclaimable at once
    assert harness.status("noop3", "e")["status"] == "complete"


def test_restart_fences_off_the_runner_of_the_previous_run(harness):
    services.instance_create(workflow_name="noop3", instance_id="r")
    claim, loaded = claim_next(owner="old", lease_seconds=30)
    harness.restart("noop3", "r", run=False)
    assert execute(claim, loaded, threaded=False) == "halted"
    assert WorkflowStep.objects.count() == 0
    harness.run_until_idle()
    assert harness.status("noop3", "r")["status"] == "complete"


@pytest.mark.django_db(transaction=True)  # the watchdog renews from its own thread/connection
def test_the_lease_is_renewed_while_a_long_step_runs(settings):
    # Seen in a CI run with a 0.3 s lease: a renewal (each opens a connection) late by more than
    # 0.2 s on the loaded 2-core machine lost the lease. A third of a 1 s lease is the margin now.
    settings.WORKFLOWS_LEASE_SECONDS = 1.0
    services.instance_create(workflow_name="t-slow-step", instance_id="l", params={"seconds": 2.5})
    assert run_one(owner="r", threaded=True) == "complete"  # without renewal: lost at 1 s


def test_pause_during_a_step_keeps_its_result_and_starts_nothing_new(harness):
    services.instance_create(workflow_name="t-slow-step", instance_id="p", params={"seconds": 0})
    claim, loaded = claim_next(owner="r", lease_seconds=30)

    @workflow(name="t-pause-inside")
    def pause_inside(event, step):
        step.do("first", lambda: services.instance_pause(instance=_row("p")) and "kept")
        step.do("second", lambda: "never")

    WorkflowInstance.objects.filter(instance_id="p").update(workflow_name="t-pause-inside")
    loaded.workflow_name = "t-pause-inside"
    outcome = execute(claim, loaded, threaded=False)
    assert outcome == "halted", WorkflowInstance.objects.get(instance_id="p").error
    steps = list(WorkflowStep.objects.values_list("name", "status", "result"))
    assert steps == [("first", "complete", "kept")]
    assert WorkflowInstance.objects.get(instance_id="p").status == "paused"


def _row(instance_id):
    return WorkflowInstance.objects.get(instance_id=instance_id)


def test_work_made_runnable_schedules_a_wake_task_after_commit(
    db, settings, django_capture_on_commit_callbacks, monkeypatch
):
    settings.WORKFLOWS_WAKE_TASKS = True
    enqueued = []
    monkeypatch.setattr("django_q.tasks.async_task", lambda func, **kw: enqueued.append(func))
    with django_capture_on_commit_callbacks(execute=True):
        services.instance_create(workflow_name="noop3", instance_id="w")
    assert enqueued == ["workflows.tasks.wake"]
    assert tasks.wake() == 1
    assert WorkflowInstance.objects.get(instance_id="w").status == "complete"


def test_sweep_and_tick_run_due_work_with_limits(db):
    for n in range(3):
        services.instance_create(workflow_name="noop3", instance_id=f"s{n}")
    assert tick(max_instances=1) == 1
    assert tick(max_instances=10, max_steps=2) == 1  # two step attempts, then it yields
    assert tasks.sweep() >= 2
    assert set(WorkflowInstance.objects.values_list("status", flat=True)) == {"complete"}


@pytest.mark.django_db(transaction=True)
def test_runworkflows_once_drains_due_work_with_several_threads():
    for n in range(6):
        services.instance_create(workflow_name="noop3", instance_id=f"c{n}")
    # The test SQLite database is in-memory with a shared cache, which ignores the busy timeout
    # ("table is locked"), so threads only run concurrently here on PostgreSQL.
    threads = "2" if connection.vendor == "postgresql" else "1"
    call_command("runworkflows", "--concurrency", threads, "--once")
    assert set(WorkflowInstance.objects.values_list("status", flat=True)) == {"complete"}
    assert WorkflowTask.objects.count() == 0  # finished tasks are deleted


@pytest.mark.postgres_only
def test_the_claim_query_walks_the_partial_index(db):
    from workflows.engine.store import CLAIM_NEXT

    now = runtime.now()
    instances = WorkflowInstance.objects.bulk_create(
        WorkflowInstance(
            workflow_name="noop3",
            instance_id=f"p{n}",
            version=1,
            created_at=now,
            updated_at=now,
        )
        for n in range(3000)
    )
    WorkflowTask.objects.bulk_create(
        WorkflowTask(
            instance=inst,
            run_number=1,
            kind="start",
            priority=1,
            # Most rows not runnable (paused) - the index must skip them, not the heap.
            run_at=now if n % 10 == 0 else None,
            created_at=now,
        )
        for n, inst in enumerate(instances)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE workflow_task")
        # None: the server's clock (statement_timestamp()), as production runners claim.
        cursor.execute("EXPLAIN " + CLAIM_NEXT, ["o", None, 30, None, None, now, now])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "workflow_task_runnable" in plan, plan


def test_setup_schedules_installs_exactly_one_one_minute_sweep(db):
    from django_q.models import Schedule

    call_command("setup_schedules", stdout=io.StringIO())
    call_command("setup_schedules", stdout=io.StringIO())
    sweeps = Schedule.objects.filter(func="workflows.tasks.sweep")
    assert [(s.schedule_type, s.minutes) for s in sweeps] == [("I", 1)]
