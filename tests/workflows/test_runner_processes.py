"""Real `manage.py runworkflows` processes on PostgreSQL: crashes, many runners, stopped runners,
pause during a step. Executions are counted in a trace file written by the step callbacks."""

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection

from workflows import services
from workflows.models import WorkflowInstance, WorkflowStep

pytestmark = [pytest.mark.postgres_only, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
MODULES = "tests.workflows.sample_workflows"


@pytest.fixture
def runners(tmp_path, transactional_db):
    """runners.start(lease=2) → a Popen of `manage.py runworkflows` on the test database.

    It asks for the database first, so pytest tears the database down (a TRUNCATE) only after
    every runner is killed: a runner still claiming during the flush deadlocked it."""
    started: list[subprocess.Popen] = []

    class Runners:
        def start(
            self, *, lease: float = 2, concurrency: int = 1, modules: str = MODULES
        ) -> subprocess.Popen:
            s = connection.settings_dict
            url = (
                f"postgres://{s['USER']}:{s['PASSWORD']}@{s['HOST'] or '127.0.0.1'}:"
                f"{s['PORT'] or 5432}/{s['NAME']}"
            )
            env = {
                **os.environ,
                "DATABASE_URL": url,
                "WORKFLOWS_MODULES": modules,
                "WORKFLOWS_LEASE_SECONDS": str(lease),
                "LOG_LEVEL": "WARNING",
            }
            log = open(tmp_path / f"runner-{len(started)}.log", "w")  # noqa: SIM115
            cmd = [sys.executable, "manage.py", "runworkflows", "--poll", "0.1"]
            cmd += ["--concurrency", str(concurrency)]
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=log)
            started.append(proc)
            return proc

    yield Runners()
    for proc in started:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
        proc.wait(10)


def wait_for(predicate, timeout: float = 30, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def trace_lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def executions(path: Path) -> Counter:
    return Counter((inst, step) for inst, step, _pid in trace_lines(path))


def status_of(instance_id: str) -> str:
    return WorkflowInstance.objects.get(instance_id=instance_id).status


def test_kill_9_during_step_3_of_5_completes_and_reruns_only_step_3(runners, tmp_path):
    trace = tmp_path / "trace"
    services.instance_create(
        workflow_name="sample-steps",
        instance_id="k",
        params={"steps": 5, "sleep_ms": {"3": 2000}, "trace": str(trace)},
    )
    first = runners.start()
    wait_for(lambda: ("k", "step-3") in executions(trace), what="step 3 to start")
    first.kill()  # SIGKILL: no cleanup, the lease must expire
    first.wait(5)
    runners.start()
    wait_for(lambda: status_of("k") == "complete", what="completion after the crash")
    counts = executions(trace)
    assert [counts[("k", f"step-{i}")] for i in (1, 2, 4, 5)] == [1, 1, 1, 1]
    assert counts[("k", "step-3")] in (1, 2)
    assert WorkflowStep.objects.filter(instance__instance_id="k", status="complete").count() == 5


def test_four_runners_over_500_instances_with_one_killed_and_restarted(runners, tmp_path):
    trace = tmp_path / "trace"
    services.instance_create_batch(
        workflow_name="sample-steps",
        items=[
            {"id": f"i{n}", "params": {"steps": 3, "sleep_ms": 2, "trace": str(trace)}}
            for n in range(500)
        ],
    )
    procs = [runners.start(lease=2) for _ in range(4)]
    wait_for(lambda: len(trace_lines(trace)) > 300, what="progress before the kill")
    procs[0].kill()
    procs[0].wait(5)
    runners.start(lease=2)
    wait_for(
        lambda: not WorkflowInstance.objects.exclude(status="complete").exists(),
        timeout=90,
        what="all 500 instances to complete",
    )
    steps = WorkflowStep.objects.filter(status="complete")
    assert steps.count() == 1500  # exactly one stored completion per step (unique + complete)
    counts = executions(trace)
    assert len(counts) == 1500
    assert sum(n - 1 for n in counts.values()) <= 1  # only the killed runner's step re-ran
    # One writer at a time: along each instance's steps the fencing token never goes back.
    tokens: dict[str, list[int]] = {}
    for inst, token in steps.order_by("id").values_list("instance__instance_id", "fencing_token"):
        tokens.setdefault(inst, []).append(token)
    assert all(seq == sorted(seq) for seq in tokens.values())
    pids_per_instance = {}
    for inst, _step, pid in trace_lines(trace):
        pids = pids_per_instance.setdefault(inst, [])
        if not pids or pids[-1] != pid:
            pids.append(pid)
    assert all(len(p) == len(set(p)) for p in pids_per_instance.values())  # no A→B→A


def test_a_stopped_runner_past_its_lease_cannot_write_after_it_continues(runners, tmp_path):
    trace = tmp_path / "trace"
    services.instance_create(
        workflow_name="sample-steps",
        instance_id="s",
        params={"steps": 3, "sleep_ms": {"2": 1500}, "trace": str(trace)},
    )
    stopped = runners.start(lease=1)
    wait_for(lambda: ("s", "step-2") in executions(trace), what="step 2 to start")
    os.kill(stopped.pid, signal.SIGSTOP)
    time.sleep(1.5)  # past its lease
    other = runners.start(lease=1)
    wait_for(lambda: status_of("s") == "complete", what="the second runner to finish")
    os.kill(other.pid, signal.SIGTERM)
    assert other.wait(15) == 0
    rows_before = list(WorkflowStep.objects.order_by("id").values_list("name", "fencing_token"))
    os.kill(stopped.pid, signal.SIGCONT)
    time.sleep(2.5)  # its step-2 thread finishes; its boundary commit must be refused
    rows_after = list(WorkflowStep.objects.order_by("id").values_list("name", "fencing_token"))
    assert rows_after == rows_before
    # step-1 was stored by the stopped runner before it stopped; steps 2 and 3 by the other one.
    assert [name for name, _ in rows_after] == ["step-1", "step-2", "step-3"]
    assert rows_after[0][1] < rows_after[1][1] == rows_after[2][1]
    assert (("s", "step-3", str(stopped.pid))) not in {tuple(x) for x in trace_lines(trace)}
    os.kill(stopped.pid, signal.SIGTERM)
    assert stopped.wait(15) == 0  # and it shuts down cleanly


def test_pause_during_a_long_step_keeps_its_result_and_the_next_step_does_not_start(
    runners, tmp_path
):
    trace = tmp_path / "trace"
    services.instance_create(
        workflow_name="sample-steps",
        instance_id="p",
        params={"steps": 3, "sleep_ms": {"2": 1500}, "trace": str(trace)},
    )
    runners.start()
    wait_for(lambda: ("p", "step-2") in executions(trace), what="step 2 to start")
    services.instance_pause(instance=WorkflowInstance.objects.get(instance_id="p"))
    wait_for(
        lambda: WorkflowStep.objects.filter(name="step-2", status="complete").exists(),
        what="step 2 to store its result",
    )
    time.sleep(1)
    assert ("p", "step-3") not in executions(trace)
    assert status_of("p") == "paused"
    services.instance_resume(instance=WorkflowInstance.objects.get(instance_id="p"))
    wait_for(lambda: status_of("p") == "complete", what="completion after resume")
    assert executions(trace)[("p", "step-2")] == 1
