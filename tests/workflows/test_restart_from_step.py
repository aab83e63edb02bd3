"""restart(from_step=...): the new run keeps the results of the steps completed before the
named one and runs that step and the rest; an unknown step is `unknown_step`."""

import pytest

from tests.workflows import test_cli
from tests.workflows.test_http_support import ALL_SCOPES
from workflows import get_workflow
from workflows.errors import UnknownStep, WorkflowError

server, wf = test_cli.server, test_cli.wf  # the live-server CLI fixtures


def _lines(path):
    return path.read_text().split()


def test_restart_from_the_third_of_five_steps_runs_steps_three_to_five_only(harness, tmp_path):
    trace = tmp_path / "trace"
    harness.create("five-steps", id="f1", params={"trace": str(trace)})
    assert harness.status("five-steps", "f1") == {"status": "complete", "output": [1, 2, 3, 4, 5]}
    trace.write_text("")
    harness.restart("five-steps", "f1", from_step="s3")
    assert _lines(trace) == ["s3", "s4", "s5"]
    assert harness.status("five-steps", "f1") == {"status": "complete", "output": [1, 2, 3, 4, 5]}
    run2 = harness.history("five-steps", "f1")["steps"]
    assert [s["name"] for s in run2] == ["s1", "s2", "s3", "s4", "s5"]
    assert harness.instance("five-steps", "f1").run_number == 2


def test_restart_from_the_first_step_reruns_everything(harness, tmp_path):
    trace = tmp_path / "trace"
    harness.create("five-steps", id="f1", params={"trace": str(trace)})
    trace.write_text("")
    harness.restart("five-steps", "f1", from_step="s1")
    assert _lines(trace) == ["s1", "s2", "s3", "s4", "s5"]


def test_restart_from_an_unknown_step_raises_unknown_step_and_changes_nothing(harness):
    harness.create("five-steps", id="f1")
    with pytest.raises(UnknownStep) as caught:
        get_workflow("five-steps").get("f1").restart(from_step="nope")
    assert isinstance(caught.value, WorkflowError)
    assert caught.value.code == "unknown_step"
    assert harness.instance("five-steps", "f1").run_number == 1


def test_restart_from_a_step_of_an_errored_instance(harness, tmp_path):
    harness.create("five-steps", id="f1")
    handle = get_workflow("five-steps").get("f1")
    handle.restart(from_step="s4")
    harness.run_until_idle()
    assert handle.status() == {"status": "complete", "output": [1, 2, 3, 4, 5]}


def test_http_restart_from_step_and_unknown_step_is_400(operator_api, harness):
    api = operator_api(*ALL_SCOPES, name="oncall")
    harness.create("five-steps", id="f1")
    url = "/v1/workflows/five-steps/instances/f1/restart"
    response = api.post(url, {"from_step": "nope"}, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "unknown_step")
    response = api.post(url, {"from_step": "s5"}, format="json")
    assert response.status_code == 200
    assert response.json()["details"]["status"] == "active"
    harness.run_until_idle()
    assert harness.status("five-steps", "f1")["status"] == "complete"
    assert harness.instance("five-steps", "f1").run_number == 2


def test_http_restart_without_a_body_still_restarts_from_the_beginning(operator_api, harness):
    api = operator_api(*ALL_SCOPES, name="oncall")
    harness.create("five-steps", id="f1")
    response = api.post("/v1/workflows/five-steps/instances/f1/restart")
    assert response.status_code == 200
    assert harness.instance("five-steps", "f1").run_number == 2


def test_cli_restart_from_step(wf, transactional_db, tmp_path):
    from workflows.engine import tick

    trace = tmp_path / "trace"
    get_workflow("five-steps").create(id="f1", params={"trace": str(trace)})
    tick(threaded=False)
    trace.write_text("")
    code, out, err = wf(
        "instances", "restart", "-w", "five-steps", "--id", "f1", "--from-step", "s2"
    )
    assert code == 0, err
    tick(threaded=False)
    assert _lines(trace) == ["s2", "s3", "s4", "s5"]
    code, _, err = wf("instances", "restart", "-w", "five-steps", "--id", "f1", "--from-step", "zz")
    assert code != 0 and "unknown_step" in err
