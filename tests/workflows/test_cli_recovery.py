"""Recovery through vitalflow-wf (HTTP only): retry now, skip wait and bulk actions by filter,
against a live test server."""

import io

import pytest

from graphs import cli as graphs_cli
from ops.bulk import bulk_job_run
from ops.models import BulkJob
from tests.workflows import test_cli
from tests.workflows import test_recovery_actions as flows
from workflows import services
from workflows.models import WorkflowInstance

# The live server, its operator key and the in-process console script, from test_cli.
server, wf, tick = test_cli.server, test_cli.wf, test_cli.tick


def test_retry_now_from_the_console_script_runs_the_step_in_backoff(wf):
    flows.CALLS.clear()
    services.instance_create(
        workflow_name="t-recover-backoff", instance_id="b1", params={"key": "b1"}
    )
    tick()
    code, out, err = wf("instances", "retry-now", "--workflow", "t-recover-backoff", "--id", "b1")
    assert code == 0, err
    assert out.startswith("retry-now b1:")
    tick()
    assert WorkflowInstance.objects.get(instance_id="b1").status == "complete"


def test_skip_wait_on_an_instance_that_does_not_sleep_exits_1_with_the_code(wf):
    flows.CALLS.clear()
    services.instance_create(
        workflow_name="t-recover-backoff", instance_id="b2", params={"key": "b2"}
    )
    tick()
    code, _, err = wf("instances", "skip-wait", "--workflow", "t-recover-backoff", "--id", "b2")
    assert code == 1 and "not_sleeping" in err


@pytest.fixture
def script(server):
    """The installed vitalflow-wf (graphs.cli.main: the workflows commands plus its groups)."""

    def run(*argv):
        out, err = io.StringIO(), io.StringIO()
        prefix = ["--url", server["url"], "-H", f"X-Admin-Key: {server['key']}"]
        return graphs_cli.main([*prefix, *argv], out=out, err=err), out.getvalue(), err.getvalue()

    return run


def test_bulk_restart_by_filter_counts_then_starts_a_job_and_reports_it(script):
    for n in range(2):
        services.instance_create(workflow_name="h5-fail", instance_id=f"e{n}")
    tick()
    args = ["bulk", "restart", "--workflow", "h5-fail", "--status", "errored"]
    code, out, err = script(*args, "--newer-than", "1h", "--dry-run")
    assert (code, out.strip()) == (0, "restart would touch 2 instance(s)"), err
    code, out, err = script(*args)
    assert code == 0, err
    job = BulkJob.objects.get()
    expected = f"bulk job {job.pk} workflow_instances.restart"
    assert out.strip() == f"{expected}: queued, 0/2 (0 failed)"
    bulk_job_run(job.pk)
    assert script("bulk", "job", str(job.pk))[1].strip() == f"{expected}: finished, 2/2 (0 failed)"
    code, out, err = script(*args, "--newer-than", "1h", "--dry-run")
    assert out.strip() == "restart would touch 0 instance(s)"
