"""The step boundary's cost on PostgreSQL: outside a transaction a boundary is one
round trip (guard and writes in one pipeline), the task row is written only when there is
something to write, and a boundary refused in that path writes nothing (the fault guarantees of docs/workflows/faults.md).
Counts, never times."""

from datetime import UTC, datetime, timedelta

import pytest

from bench.pgcost import RoundTrips
from ops import pgwire
from workflows import services, workflow
from workflows.decisions import DISCARD, PROCEED
from workflows.engine import persist, run_one
from workflows.engine.claim import claim_next
from workflows.engine.execute import execute
from workflows.models import WorkflowInstance, WorkflowStep, WorkflowTask
from workflows.testing import WorkflowHarness

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def harness():
    """The harness outside any transaction: the runner's production path (transaction=True)."""
    with WorkflowHarness(start=START) as h:
        yield h


def _row(instance_id):
    return WorkflowInstance.objects.get(instance_id=instance_id)


def test_a_three_step_run_is_a_claim_and_one_round_trip_per_boundary(settings):
    settings.WORKFLOWS_WAKE_TASKS = False
    services.instance_create(workflow_name="noop3", instance_id="warm")
    assert run_one(owner="r", threaded=False) == "complete"  # clock offset and cron gate read
    services.instance_create(workflow_name="noop3", instance_id="counted")
    trips = RoundTrips().install()
    try:
        outcome = run_one(owner="r", threaded=False)
    finally:
        trips.uninstall()
    assert outcome == "complete"
    assert _row("counted").output == 3
    # claim + 4 boundaries (a starts; a done, b starts; b done, c starts; c done, finish)
    assert trips.get("-", "round trips") == 5


def test_a_fenced_off_runner_writes_nothing_in_the_one_round_trip_path(harness):
    services.instance_create(workflow_name="noop3", instance_id="r")
    claim, loaded = claim_next(owner="old", lease_seconds=30)
    harness.restart("noop3", "r", run=False)
    assert pgwire.postgres_autocommit()
    assert execute(claim, loaded, threaded=False) == "halted"
    assert WorkflowStep.objects.count() == 0
    assert persist.commit(claim, persist.Pending(), persist.Finish("x")) == DISCARD
    harness.run_until_idle()
    assert harness.status("noop3", "r")["status"] == "complete"


def test_pause_during_a_step_keeps_its_result_in_the_one_round_trip_path(harness):
    @workflow(name="t-cost-pause-inside")
    def pause_inside(event, step):
        step.do("first", lambda: services.instance_pause(instance=_row("p")) and "kept")
        step.do("second", lambda: "never")

    services.instance_create(workflow_name="t-cost-pause-inside", instance_id="p")
    claim, loaded = claim_next(owner="r", lease_seconds=30)
    assert execute(claim, loaded, threaded=False) == "halted"
    steps = list(WorkflowStep.objects.values_list("name", "status", "result"))
    assert steps == [("first", "complete", "kept")]
    assert _row("p").status == "paused"
    assert WorkflowTask.objects.get().locked_until is None  # the lease was given back


def test_a_boundary_rewrites_the_task_row_only_to_renew_a_third_used_lease(harness):
    services.instance_create(workflow_name="noop3", instance_id="l")
    claim, _ = claim_next(owner="r", lease_seconds=30)
    claimed_until = WorkflowTask.objects.get().locked_until
    harness.runtime.advance(timedelta(seconds=5))
    assert persist.commit(claim, persist.Pending(), persist.Continue()) == PROCEED
    assert WorkflowTask.objects.get().locked_until == claimed_until  # 25 s of 30 left: kept
    harness.runtime.advance(timedelta(seconds=6))
    assert persist.commit(claim, persist.Pending(), persist.Continue()) == PROCEED
    assert WorkflowTask.objects.get().locked_until == harness.now() + timedelta(seconds=30)


def test_progress_resets_the_recovery_count_once(harness):
    services.instance_create(workflow_name="noop3", instance_id="c")
    claim, _ = claim_next(owner="r", lease_seconds=30)
    assert WorkflowTask.objects.get().recovery_attempts == 1  # this claim, until progress
    assert persist.commit(claim, persist.Pending(), persist.Requeue(harness.now())) == PROCEED
    assert WorkflowTask.objects.get().recovery_attempts == 0


def test_a_refused_suspension_that_wakes_runners_keeps_what_a_paused_run_keeps(harness):
    @workflow(name="t-cost-pause-then-sleep")
    def pause_then_sleep(event, step):
        step.do("first", lambda: services.instance_pause(instance=_row("s")) and "kept")
        step.sleep("nap", "1 hour")

    services.instance_create(workflow_name="t-cost-pause-then-sleep", instance_id="s")
    claim, loaded = claim_next(owner="r", lease_seconds=30)
    # The suspension's statement also notifies idle runners; paused, the guard aborts it and
    # the transactional path writes what a paused instance keeps (finished work, the sleep).
    assert execute(claim, loaded, threaded=False) == "suspended"
    steps = dict(WorkflowStep.objects.values_list("name", "status"))
    assert steps == {"first": "complete", "nap": "sleeping"}
    assert _row("s").status == "paused"
    task = WorkflowTask.objects.get()
    assert (task.run_at, task.locked_until) == (None, None)


def test_a_suspension_notifies_idle_runners_on_commit(settings):
    import psycopg
    from django.db import connection

    from workflows.engine.store import CHANNEL

    settings.WORKFLOWS_WAKE_TASKS = False
    params = connection.get_connection_params()
    with psycopg.connect(**params, autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANNEL}")
        services.instance_create(workflow_name="sleepy", instance_id="z")
        list(listener.notifies(timeout=1, stop_after=1))  # the create's own NOTIFY
        assert run_one(owner="r", threaded=False) == "suspended"
        assert _row("z").status == "waiting"
        heard = list(listener.notifies(timeout=5, stop_after=1))
    assert [n.channel for n in heard] == [CHANNEL]


def test_one_statement_text_is_one_query_object_on_one_kept_cursor():
    sql, cursor = pgwire.statement("SELECT %s::int + 1")
    again, same = pgwire.statement("".join(["SELECT %s::int", " + 1"]))  # equal text, new str
    other, different = pgwire.statement("SELECT %s::text")
    assert again is sql and same is cursor
    assert different is not cursor
    for value in (1, 41):  # executed again, the same object keeps psycopg's adapters
        cursor.execute(sql, [value], prepare=True)
        assert cursor.fetchone() == (value + 1,)
    different.execute(other, ["x"], prepare=True)
    assert different.fetchone() == ("x",)


def test_statement_texts_past_the_bound_forget_the_oldest_and_still_run():
    first, first_cursor = pgwire.statement("SELECT 0")
    for n in range(1, 150):  # boundaries with ever more rows would make new texts forever
        sql, cursor = pgwire.statement(f"SELECT {n}")
        cursor.execute(sql, prepare=True)
        assert cursor.fetchone() == (n,)
    last, last_cursor = pgwire.statement("SELECT 149")
    assert pgwire.statement("SELECT 149")[1] is last_cursor
    sql, cursor = pgwire.statement("SELECT 0")
    assert cursor is not first_cursor  # forgotten, and made again when asked for
    cursor.execute(sql, prepare=True)
    assert cursor.fetchone() == (0,)


def test_a_new_connection_gets_its_own_cursors():
    from django.db import connection

    _, before = pgwire.statement("SELECT 1")
    connection.close()
    sql, after = pgwire.statement("SELECT 1")
    assert after is not before and after.connection is connection.connection
    after.execute(sql, prepare=True)
    assert after.fetchone() == (1,)
