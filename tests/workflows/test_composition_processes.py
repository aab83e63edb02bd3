"""Real `manage.py runworkflows` processes on PostgreSQL, killed with SIGKILL in the middle of a
parallel step and in the middle of a child workflow's run: everything completes and each branch
step is stored exactly once."""

from collections import Counter

import pytest

from tests.workflows import test_runner_processes
from tests.workflows.test_runner_processes import wait_for
from workflows import services
from workflows.models import WorkflowInstance, WorkflowStep

pytestmark = [pytest.mark.postgres_only, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
MODULES = "tests.workflows.sample_workflows,tests.workflows.composition_workflows"
runners = test_runner_processes.runners  # the runworkflows subprocess fixture


def _lines(path):
    return path.read_text().splitlines() if path.exists() else []


def _status(workflow, instance_id):
    row = WorkflowInstance.objects.filter(workflow_name=workflow, instance_id=instance_id).first()
    return row.status if row else None


def test_kill_9_during_a_parallel_step_completes_with_each_branch_step_stored_once(
    runners, tmp_path
):
    trace = tmp_path / "trace"
    services.instance_create(
        workflow_name="par-slow-steps",
        instance_id="pk1",
        params={"trace": str(trace), "delay": 0.5},
    )
    first = runners.start(lease=2, modules=MODULES)
    wait_for(lambda: "pk1 b/1" in _lines(trace), what="branch b's second step to start")
    first.kill()
    first.wait(5)
    runners.start(lease=2, modules=MODULES)
    wait_for(lambda: _status("par-slow-steps", "pk1") == "complete", timeout=60, what="done")
    instance = WorkflowInstance.objects.get(instance_id="pk1")
    assert instance.output == {"a": 3, "b": 3, "c": 3}
    names = Counter(
        WorkflowStep.objects.filter(instance=instance, status="complete").values_list(
            "name", flat=True
        )
    )
    expected = {f"fan/{b}/s{i}" for b in "abc" for i in range(3)} | {"fan"}
    assert set(names) == expected and set(names.values()) == {1}
    runs = Counter(_lines(trace))
    # Only the step in flight at the kill may have run twice; finished ones never re-ran.
    assert runs["pk1 a/0"] == runs["pk1 a/1"] == runs["pk1 a/2"] == runs["pk1 b/0"] == 1
    assert runs["pk1 b/1"] in (1, 2)
    assert sum(runs.values()) in (9, 10)


def test_kill_9_during_a_childs_run_completes_parent_and_child(runners, tmp_path):
    trace = tmp_path / "trace"
    services.instance_create(
        workflow_name="parent",
        instance_id="pc1",
        params={"child": {"delay": 1.5, "trace": str(trace)}},
    )
    first = runners.start(lease=2, modules=MODULES)
    wait_for(lambda: "child pc1-make-double" in _lines(trace), what="the child's slow step")
    first.kill()
    first.wait(5)
    runners.start(lease=2, modules=MODULES)
    wait_for(lambda: _status("parent", "pc1") == "complete", timeout=60, what="parent done")
    parent = WorkflowInstance.objects.get(instance_id="pc1")
    assert parent.output["good"] == {"doubled": 42}
    assert parent.output["bad"]["status"] == "errored"
    assert _status("child-ok", "pc1-make-double") == "complete"
    assert WorkflowInstance.objects.filter(parent=parent).count() == 2  # no second child
    child_steps = WorkflowStep.objects.filter(instance__instance_id="pc1-make-double")
    assert list(child_steps.values_list("name", "status")) == [("slow", "complete")]
    assert _lines(trace).count("child pc1-make-double") in (1, 2)
