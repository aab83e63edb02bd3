"""Leases and due times follow the database's clock (item 2): real `runworkflows`
processes on PostgreSQL, one of them with its wall clock 10 minutes off (libfaketime)."""

import signal

import pytest

import tests.workflows.fault_workflows  # noqa: F401 - registers the fault workflows
from tests.workflows.fault_processes import Runners, faketime_env, marks, wait_for
from workflows import services
from workflows.models import WorkflowInstance

pytestmark = [pytest.mark.postgres_only, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
TEN_MINUTES = 600


@pytest.fixture
def runners(tmp_path, transactional_db):
    """Asks for the database first: it is flushed only after the runners are killed."""
    if faketime_env(0) is None:
        pytest.skip("libfaketime is not installed (apt-get install faketime; .ci/run does)")
    started = Runners(tmp_path)
    yield started
    started.stop_all()


def all_complete() -> bool:
    return not WorkflowInstance.objects.exclude(status="complete").exists()


def clock(skew: int) -> dict:
    return faketime_env(skew) if skew else {}


@pytest.mark.parametrize("skew", [TEN_MINUTES, -TEN_MINUTES], ids=["fast", "slow"])
def test_a_runner_with_a_skewed_clock_never_takes_a_live_renewed_lease(runners, tmp_path, skew):
    """A fast runner would see the live lease as expired; a slow one would write leases a
    normal runner sees as expired. Either way the 20 s step (lease 2 s, renewed) runs once,
    though the challenger starts (a few seconds) while it runs.

    (Runners under faketime are never SIGSTOPped here: libfaketime 0.9.10 loses timed waits
    across SIGSTOP/SIGCONT, so the steps are long enough to cover a runner's start-up.)"""
    trace = tmp_path / "trace"
    services.instance_create(
        workflow_name="fault-long-step",
        instance_id="lease",
        params={"seconds": 20, "trace": str(trace)},
    )
    holder, challenger = (0, skew) if skew > 0 else (skew, 0)
    runners.start(lease=2, env=clock(holder))
    wait_for(lambda: marks(trace), what="the long step to start")
    runners.start(lease=2, env=clock(challenger))
    wait_for(all_complete, timeout=90, what="the instance to complete")
    assert [m for _, m, _, _ in marks(trace)] == ["long"]  # never stolen, never run twice


@pytest.mark.parametrize(
    ("writer", "judge"),
    [(TEN_MINUTES, 0), (0, TEN_MINUTES), (-TEN_MINUTES, 0), (0, -TEN_MINUTES)],
    ids=["fast-writes", "fast-judges", "slow-writes", "slow-judges"],
)
def test_sleeps_and_retries_are_not_early_or_late_by_a_runners_skew(
    runners, tmp_path, writer, judge
):
    """One runner starts the sleeps and fails the first attempts (writing the due times), is
    stopped, and another with a different clock runs what falls due: 20 s later by the
    database's clock, not 10 minutes early or late."""
    trace = tmp_path / "trace"
    params = {"seconds": 20, "trace": str(trace)}
    for n in range(4):
        services.instance_create(workflow_name="fault-sleep", instance_id=f"s{n}", params=params)
        services.instance_create(workflow_name="fault-retry", instance_id=f"r{n}", params=params)
    first = runners.start(lease=2, env=clock(writer))
    wait_for(
        lambda: WorkflowInstance.objects.filter(status="waiting").count() == 8,
        what="all 8 instances to wait (sleep or retry)",
    )
    first.send_signal(signal.SIGTERM)
    first.wait(15)
    runners.start(lease=2, env=clock(judge))
    wait_for(all_complete, timeout=90, what="the sleeps and retries to run")
    times: dict[tuple[str, str], list[float]] = {}
    for instance, what, server_time, _pid in marks(trace):
        times.setdefault((instance, what), []).append(server_time)
    gaps = [times[(f"s{n}", "after")][0] - times[(f"s{n}", "before")][0] for n in range(4)]
    gaps += [times[(f"r{n}", "attempt")][1] - times[(f"r{n}", "attempt")][0] for n in range(4)]
    # 20 s by the database's clock (less the few ms a step boundary takes after its mark).
    assert all(19.9 <= gap < 90 for gap in gaps), gaps
