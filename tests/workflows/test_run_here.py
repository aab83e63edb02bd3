"""instance_run_here (engine/here.py): create an instance and run it in the calling process at once (as
DBOS runs a workflow called directly), with the rules of a create and of a claimed run: the
active version, a refused duplicate id that writes nothing, a lease the runners respect, caps
left to the runners, and every boundary durable. On PostgreSQL outside a transaction, the
create, the claim and the first boundary are one statement. Counts, never times."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import transaction

from bench.pgcost import RoundTrips
from workflows import services, workflow
from workflows.engine.here import instance_run_here
from workflows.errors import InstanceIdAlreadyExists, InvalidPayload, WorkflowNotFound
from workflows.models import WorkflowDeployment, WorkflowInstance, WorkflowLog, WorkflowTask
from workflows.testing import WorkflowHarness

pytestmark = pytest.mark.django_db(transaction=True)


@workflow(name="t-here", version=1)
def here_v1(event, step):
    return step.do("which", lambda: f"v1 {event.payload['n']}")


@workflow(name="t-here", version=2)
def here_v2(event, step):
    return step.do("which", lambda: f"v2 {event.payload['n']}")


@workflow(name="t-here-sleeps")
def here_sleeps(event, step):
    step.sleep("nap", "1 hour")
    return step.do("after", lambda: "woke")


@workflow(name="t-here-plain")
def here_plain(event, step):
    return {"n": event.payload["n"]}


@pytest.fixture
def harness():
    with WorkflowHarness() as h:
        yield h


def _run(instance_id, n=1, name="t-here", **kwargs):
    return instance_run_here(
        workflow_name=name, instance_id=instance_id, params={"n": n}, threaded=False, **kwargs
    )


def _row(instance_id) -> WorkflowInstance:
    return WorkflowInstance.objects.get(instance_id=instance_id)


def test_a_new_instance_runs_to_completion_in_the_calling_process(harness):
    for instance_id in ("first", "second"):  # the second create knows the version: one statement
        made = _run(instance_id)
        assert made.outcome == "complete"
        assert made.instance.instance_id == instance_id and made.instance.pk == _row(instance_id).pk
        assert harness.status("t-here", instance_id) == {"status": "complete", "output": "v1 1"}
    steps = harness.history("t-here", "second")["steps"]
    assert [(s["name"], s["status"], s["attempts"]) for s in steps] == [("which", "complete", 1)]
    messages = WorkflowLog.objects.filter(instance=_row("second")).values_list("message", flat=True)
    assert "run 1 started" in messages
    assert _row("second").code_fingerprint != ""  # recorded with the row
    assert _row("second").started_at is not None
    assert not WorkflowTask.objects.exists()


def test_an_instance_that_finishes_without_a_step_is_created_and_completed(harness):
    _run("warm", name="t-here-plain")
    assert _run("plain", n=7, name="t-here-plain").outcome == "complete"
    assert harness.status("t-here-plain", "plain") == {"status": "complete", "output": {"n": 7}}


def test_an_id_that_exists_is_refused_and_the_existing_instance_is_left_alone(harness):
    _run("warm")
    services.instance_create(workflow_name="t-here", instance_id="taken", params={"n": 1})
    with pytest.raises(InstanceIdAlreadyExists):
        _run("taken", n=2)
    assert WorkflowInstance.objects.filter(instance_id="taken").count() == 1
    task = WorkflowTask.objects.get(instance=_row("taken"))
    assert (task.lock_owner, task.claims) == ("", 0)  # still queued for a runner
    assert not WorkflowLog.objects.filter(instance=_row("taken")).exists()
    harness.run_until_idle()
    assert harness.status("t-here", "taken")["output"] == "v1 1"


def test_bad_input_is_refused_before_anything_is_written_or_run(harness):
    _run("warm")
    with pytest.raises(InvalidPayload):
        instance_run_here(workflow_name="t-here", instance_id="bad", params={"n": {1, 2}})
    with pytest.raises(WorkflowNotFound):
        instance_run_here(workflow_name="t-here-missing", instance_id="bad")
    assert list(WorkflowInstance.objects.values_list("instance_id", flat=True)) == ["warm"]


def test_a_version_activated_by_another_process_is_the_one_run(harness):
    _run("first")
    # Another process moves the pointer: nothing in this process knows.
    WorkflowDeployment.objects.filter(workflow_name="t-here").update(active_version=2)
    assert _run("second", n=2).outcome == "complete"
    assert (_row("first").version, _row("second").version) == (1, 2)
    assert harness.status("t-here", "second")["output"] == "v2 2"
    assert WorkflowLog.objects.filter(instance=_row("second"), message="run 1 started").count() == 1


def test_a_run_that_suspends_is_left_to_the_runners_and_they_finish_it(harness):
    _run("warm", name="t-here-sleeps")
    assert _run("s", name="t-here-sleeps").outcome == "suspended"
    task = WorkflowTask.objects.get(instance=_row("s"))
    assert (task.lock_owner, task.locked_until, task.kind) == ("", None, "wake")
    assert harness.run_until_idle() == 0  # not due yet
    harness.advance("1 hour")
    assert harness.status("t-here-sleeps", "s") == {"status": "complete", "output": "woke"}


def test_a_lease_taken_at_create_is_respected_by_the_runners(harness):
    @workflow(name="t-here-peek")
    def peek(event, step):
        # While this run holds the task, a runner finds nothing to claim.
        return step.do("peek", lambda: harness.tick())

    _run("warm", name="t-here-peek")
    assert _run("p", name="t-here-peek").outcome == "complete"
    assert harness.status("t-here-peek", "p")["output"] is None


def test_a_capped_workflow_is_queued_for_the_runners(harness, fleet):
    made = instance_run_here(
        workflow_name="fleet-capped", instance_id="c", params={}, threaded=False
    )
    assert made.outcome == "queued"
    task = WorkflowTask.objects.get(instance=_row("c"))
    assert (task.lock_owner, task.claims, task.concurrency_limit) == ("", 0, 2)


def test_inside_a_transaction_everything_rolls_back_with_it(harness):
    _run("warm")
    with pytest.raises(RuntimeError), transaction.atomic():
        assert _run("inside").outcome == "complete"
        raise RuntimeError("the caller's transaction fails")
    assert not WorkflowInstance.objects.filter(instance_id="inside").exists()


@pytest.mark.postgres_only
def test_create_claim_and_first_boundary_are_one_round_trip(harness):
    _run("warm")
    trips = RoundTrips().install()
    try:
        assert _run("counted").outcome == "complete"
    finally:
        trips.uninstall()
    # create + claim + "which" starts; "which" done and the instance complete
    assert trips.get("-", "round trips") == 2


_FRESH_IMPORT = """
import sys, django
django.setup()
import workflows
for name in [m for m in sys.modules if m.startswith(("workflows.engine", "workflows.services"))]:
    del sys.modules[name]
for attr in ("engine", "services"):
    workflows.__dict__.pop(attr, None)
import workflows.engine.create  # first: it reaches the engine package, which reaches it back
"""


def test_the_create_module_imports_before_the_rest_of_the_engine():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _FRESH_IMPORT], cwd=root, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
