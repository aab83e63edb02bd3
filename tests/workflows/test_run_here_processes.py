"""instance_run_here (engine/here.py) in a real process killed in its run's first step: the create, the
claim and the step's start were one synchronous commit, so the runners find the instance, count
the killed attempt and the claim without progress, and finish it (or stop a crash loop)."""

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.workflows.fault_processes import ROOT, Runners, database_url, marks, wait_for
from workflows.models import WorkflowInstance, WorkflowStep

pytestmark = [pytest.mark.postgres_only, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

_SCRIPT = """
import json, os
from workflows.engine.here import instance_run_here
params = json.loads(os.environ["HERE_PARAMS"])
warm = {"trace": params["trace"], "deaths": 0}  # first use: the ORM path; then one statement
instance_run_here(workflow_name="fault-dies-first", instance_id="warm", params=warm)
instance_run_here(workflow_name="fault-dies-first", instance_id="here", params=params)
"""


def _run_here_in_a_process(tmp_path, params: dict) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DATABASE_URL": database_url().replace("postgresql://", "postgres://", 1),
        "WORKFLOWS_MODULES": "tests.workflows.fault_workflows",
        "WORKFLOWS_LEASE_SECONDS": "1",
        "WORKFLOWS_MAX_RECOVERY_ATTEMPTS": "3",
        "LOG_LEVEL": "WARNING",
        "HERE_PARAMS": json.dumps(params),
    }
    cmd = [sys.executable, "manage.py", "shell", "-c", _SCRIPT]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def _instance():
    return WorkflowInstance.objects.get(instance_id="here")


def test_a_process_killed_in_the_first_step_leaves_the_run_to_a_runner(tmp_path):
    trace = tmp_path / "trace"
    done = _run_here_in_a_process(tmp_path, {"trace": str(trace), "deaths": 1})
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    assert _instance().status == "active"  # created, leased, its step started: all committed
    runners = Runners(tmp_path)
    try:
        runners.start(lease=1, env={"WORKFLOWS_MAX_RECOVERY_ATTEMPTS": "3"})
        wait_for(lambda: _instance().status == "complete", what="a runner to finish it")
    finally:
        runners.stop_all()
    assert _instance().output == 3
    first = WorkflowStep.objects.get(instance=_instance(), name="first")
    assert (first.status, first.attempts) == ("complete", 2)  # the killed attempt counted
    pids = [pid for inst, m, _, pid in marks(trace) if (inst, m) == ("here", "first")]
    assert len(pids) == 2 and pids[0] != pids[1]


def test_a_first_step_that_always_kills_its_process_is_stopped_as_a_crash_loop(tmp_path):
    trace = tmp_path / "trace"
    done = _run_here_in_a_process(tmp_path, {"trace": str(trace), "deaths": 99})
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    runners = Runners(tmp_path)
    try:
        for _ in range(5):
            if _instance().status == "errored":
                break
            proc = runners.start(lease=1, env={"WORKFLOWS_MAX_RECOVERY_ATTEMPTS": "3"})
            wait_for(
                lambda proc=proc: proc.poll() is not None or _instance().status == "errored",
                what="the runner to die or the instance to be errored",
            )
    finally:
        runners.stop_all()
    assert _instance().error["name"] == "MaxRecoveryAttemptsExceeded"
    # The create in the killed process was the first claim without progress; 2 runners' more.
    deaths = [m for inst, m, _, _ in marks(trace) if (inst, m) == ("here", "first")]
    assert len(deaths) == 3
