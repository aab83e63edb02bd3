"""Transient database faults never fail an instance (item 1): real `runworkflows`
processes on PostgreSQL whose backends are terminated under them, or whose connection breaks
exactly at a step-boundary commit, before or after the COMMIT reaches the server."""

import pytest
from django.db.models import Count

from tests.workflows.fault_processes import BackendKiller, Runners, executions, wait_for
from workflows import services
from workflows.models import WorkflowInstance, WorkflowStep

pytestmark = [pytest.mark.postgres_only, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def runners(tmp_path, transactional_db):
    """Asks for the database first: it is flushed only after the runners are killed."""
    started = Runners(tmp_path)
    yield started
    started.stop_all()


def settled() -> bool:
    return not WorkflowInstance.objects.filter(status__in=["active", "waiting"]).exists()


def test_killing_the_runners_backends_every_2_s_errors_no_instance(runners, tmp_path):
    trace = tmp_path / "trace"
    services.instance_create_batch(
        workflow_name="sample-steps",
        items=[
            {"id": f"k{n}", "params": {"steps": 5, "sleep_ms": 20, "trace": str(trace)}}
            for n in range(100)
        ],
    )
    with BackendKiller(every=2) as killer:
        for _ in range(2):
            runners.start(lease=3, concurrency=2)
        wait_for(settled, timeout=240, what="all 100 instances to settle")
    assert killer.killed > 0  # the killer did hit the runners
    statuses = dict(
        WorkflowInstance.objects.values_list("status").annotate(n=Count("id")).order_by()
    )
    assert statuses == {"complete": 100}
    assert WorkflowStep.objects.filter(status="complete").count() == 500  # each stored once
    assert set(executions(trace)) == {
        (f"k{n}", f"step-{i}") for n in range(100) for i in range(1, 6)
    }


@pytest.mark.parametrize("point", ["boundary_commit_before", "boundary_commit_after"])
def test_connection_lost_at_a_boundary_commit_the_instance_completes(runners, tmp_path, point):
    trace = tmp_path / "trace"
    services.instance_create(
        workflow_name="sample-steps", instance_id="b", params={"steps": 4, "trace": str(trace)}
    )
    # Every one of the first 5 boundary commits loses its connection (4 steps: 9 boundaries).
    runners.start(lease=2, env={"WORKFLOWS_FAULT_AT": f"{point}:5"})
    wait_for(settled, timeout=60, what="the instance to settle")
    instance = WorkflowInstance.objects.get(instance_id="b")
    assert (instance.status, instance.error) == ("complete", None)
    assert instance.output == [1, 2, 3, 4]
    assert WorkflowStep.objects.filter(instance=instance, status="complete").count() == 4
    counts = executions(trace)
    assert set(counts) == {("b", f"step-{i}") for i in range(1, 5)}  # never zero times
    log = (tmp_path / "runner-0.log").read_text()
    assert log.count("storage fault on sample-steps/b") == 5  # the hook did fire, 5 times
