"""vitalflow-wf against a live test server: a real subprocess of the console script, and
workflows.cli.main(argv) in-process for the rest (same code, faster)."""

import io
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ops.models import IdempotencyKey
from ops.services import api_key_create
from tests.ops.test_idempotency import IS_POSTGRES
from tests.workflows.test_http_support import ALL_SCOPES
from workflows import cli, services
from workflows.engine import tick as runner_tick
from workflows.selectors import instance_get

SCRIPT = Path(sys.executable).parent / "vitalflow-wf"


@pytest.fixture
def server(live_server):
    _, raw = api_key_create(name="cli", scopes=list(ALL_SCOPES))
    return {"url": f"{live_server.url}/v1", "key": raw}


@pytest.fixture
def wf(server):
    """wf("instances", "list", ...) → (exit code, stdout, stderr) through cli.main."""

    def run(*argv, url=server["url"], key=server["key"]):
        out, err = io.StringIO(), io.StringIO()
        prefix = ["--url", url] if url else []
        prefix += ["-H", f"X-Admin-Key: {key}"] if key else []
        code = cli.main([*prefix, *argv], out=out, err=err)
        return code, out.getvalue(), err.getvalue()

    return run


def tick() -> int:
    """Move instances forward with the engine's runner, in this process."""
    return runner_tick(max_instances=50, threaded=False)


def test_the_console_script_lists_workflows_in_a_real_subprocess(server):
    result = subprocess.run(
        [str(SCRIPT), "--url", server["url"], "-H", f"X-Admin-Key: {server['key']}"]
        + ["workflows", "list"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "h5-approval  versions=1  active=1" in result.stdout
    assert "h5-ver  versions=1,2  active=1" in result.stdout


def test_the_console_script_reads_url_and_headers_from_the_environment(server):
    env = {
        **os.environ,
        "VITALFLOW_URL": server["url"],
        "VITALFLOW_HEADERS": f"X-Admin-Key: {server['key']};X-Request-ID: cli-test",
    }
    result = subprocess.run(
        [str(SCRIPT), "instances", "create", "--workflow", "h5-approval", "--id", "env-1"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "created env-1  active"
    # A key was generated for the create: 32 hex characters.
    assert len(IdempotencyKey.objects.get().key) == 32


def test_api_errors_print_code_and_message_and_exit_1_in_a_subprocess(server):
    result = subprocess.run(
        [str(SCRIPT), "--url", server["url"], "-H", "X-Admin-Key: wrong"]
        + ["instances", "get", "-w", "h5-approval", "-i", "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: authentication_required: ")
    assert "(HTTP 401)" in result.stderr


def test_create_list_get_and_history(wf):
    assert (
        wf("instances", "create", "-w", "h5-approval", "--id", "o1", "--params", '{"order": 7}')[0]
        == 0
    )
    tick()
    code, out, _ = wf("instances", "list", "--workflow", "h5-approval")
    assert (code, out) == (0, "o1  waiting\n")

    code, out, _ = wf("instances", "get", "--workflow", "h5-approval", "--id", "o1")
    assert code == 0
    assert "status:   waiting" in out
    assert "current:  wait_for_event 'approval' waiting" in out
    assert "waiting for event approve" in out

    code, out, _ = wf("instances", "get", "-w", "h5-approval", "-i", "o1", "--full")
    assert '"order": 7' in out and "created_at:" in out

    code, out, _ = wf("instances", "history", "-w", "h5-approval", "-i", "o1", "--include-logs")
    assert code == 0
    assert "complete   do              prepare" in out
    assert "waiting    wait_for_event  approval" in out
    assert "waiting for approval" in out


def test_list_pages_with_a_cursor_or_follows_all(wf):
    for n in range(3):
        wf("instances", "create", "-w", "h5-approval", "--id", f"o{n}")
    code, out, _ = wf("instances", "list", "-w", "h5-approval", "--page-size", "2")
    lines = out.splitlines()
    assert lines[:2] == ["o2  active", "o1  active"]
    assert lines[2].startswith("-- more: --cursor ")
    cursor = lines[2].split()[-1]
    assert wf("instances", "list", "-w", "h5-approval", "--cursor", cursor)[1] == "o0  active\n"
    all_out = wf("instances", "list", "-w", "h5-approval", "--page-size", "1", "--all")[1]
    assert all_out.splitlines() == ["o2  active", "o1  active", "o0  active"]


def test_actions_events_and_logs(wf):
    wf("instances", "create", "-w", "h5-approval", "--id", "o1")
    tick()
    assert wf("instances", "pause", "-w", "h5-approval", "-i", "o1")[1] == "pause o1: paused\n"
    assert wf("instances", "resume", "-w", "h5-approval", "-i", "o1")[1] == "resume o1: active\n"
    code, out, _ = wf(
        "instances", "send-event", "-w", "h5-approval", "-i", "o1", "--type", "approve",
        "--payload", '{"by": "ann"}',
    )  # fmt: skip
    assert (code, out) == (0, "sent approve to o1: active\n")
    tick()
    code, out, _ = wf("instances", "get", "-w", "h5-approval", "-i", "o1")
    assert 'complete  output={"order": null, "approved_by": "ann"}' in out

    code, out, _ = wf("instances", "logs", "-w", "h5-approval", "-i", "o1", "--follow")
    assert code == 0  # --follow returns once the instance is finished
    assert "INFO  workflow: waiting for approval" in out
    assert "(replay)" in out  # the second run replayed the log line

    assert wf("instances", "restart", "-w", "h5-approval", "-i", "o1")[1] == "restart o1: active\n"
    code, out, _ = wf("instances", "terminate", "-w", "h5-approval", "-i", "o1")
    assert out == "terminate o1: terminated\n"
    code, _, err = wf("instances", "pause", "-w", "h5-approval", "-i", "o1")
    assert code == 1
    assert err.startswith("error: instance_terminal: ") and "(HTTP 409)" in err


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["instances", "get", "-w", "h5-approval", "-i", "ghost"], 1, "instance_not_found"),
        (["instances", "create", "-w", "nope"], 1, "workflow_not_found"),
        (["instances", "create", "-w", "h5-approval", "--params", "{bad"], 2, "not valid JSON"),
        (["instances", "list", "-w", "h5-approval", "--status", "sleepy"], 1, "invalid_request"),
    ],
)
def test_errors_exit_non_zero_with_the_api_code(wf, argv, code, message):
    got, _, err = wf(*argv)
    assert got == code
    assert message in err


def test_missing_url_and_unreachable_server_are_usage_and_connection_errors(wf, monkeypatch):
    monkeypatch.delenv("VITALFLOW_URL", raising=False)
    assert wf("workflows", "list", url=None)[0] == 2
    code, _, err = wf("workflows", "list", url="http://127.0.0.1:9/v1")
    assert code == 3 and "cannot reach" in err
    assert wf("-H", "no colon", "workflows", "list")[0] == 2


def test_a_url_that_is_not_the_api_base_says_so(wf, server):
    code, _, err = wf("workflows", "list", url=server["url"].removesuffix("/v1") + "/nope")
    assert code == 1
    assert err.startswith("error: not_found: ") and "is --url the API base" in err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["workflows"],
        ["workflows", "list"],
        ["instances"],
        ["instances", "list"],
        ["instances", "get"],
        ["instances", "history"],
        ["instances", "logs"],
        ["instances", "create"],
        ["instances", "pause"],
        ["instances", "resume"],
        ["instances", "restart"],
        ["instances", "terminate"],
        ["instances", "send-event"],
    ],
)
def test_help_at_every_level_lists_env_vars_and_examples(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main([*argv, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "VITALFLOW_URL" in out and "VITALFLOW_HEADERS" in out and "examples:" in out
    assert "vitalflow-wf" in out


def test_the_cli_imports_nothing_from_django_or_the_project():
    source = Path(cli.__file__).read_text()
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert all("django" not in line and "workflows" not in line for line in imports)


def test_logs_follow_prints_the_last_lines_when_the_instance_finishes_between_two_reads(
    wf, monkeypatch
):
    """The instance completes after the follower read the logs and before it read the status:
    the lines written meanwhile are still printed (the follower used to stop without them)."""
    wf("instances", "create", "-w", "h5-approval", "--id", "o2")
    tick()
    real_call, logs_read, finished = cli.Api.call, [], []

    def call(self, method, path, **kwargs):
        if path.endswith("/history"):
            logs_read.append(True)
        elif method == "GET" and path.endswith("/instances/o2") and logs_read and not finished:
            finished.append(True)  # after a logs read, before this status read
            services.instance_send_event(
                instance=instance_get(workflow_name="h5-approval", instance_id="o2"),
                type="approve",
            )
            tick()
        return real_call(self, method, path, **kwargs)

    monkeypatch.setattr(cli.Api, "call", call)
    code, out, _ = wf("instances", "logs", "-w", "h5-approval", "-i", "o2", "-f", "--interval", "0")
    assert code == 0 and finished
    assert "event 'approve' received" in out and "instance complete" in out
    lines = out.splitlines()
    assert len(lines) == len(set(lines))


@pytest.mark.postgres_only
@pytest.mark.skipif(
    not IS_POSTGRES,
    reason="the live server shares SQLite's in-memory connection; this test writes concurrently",
)
def test_logs_follow_prints_new_lines_until_the_instance_finishes(wf):
    wf("instances", "create", "-w", "h5-approval", "--id", "o1")
    tick()
    result = {}
    follower = threading.Thread(
        target=lambda: result.update(
            out=wf("instances", "logs", "-w", "h5-approval", "-i", "o1", "-f", "--interval", "0.1")
        )
    )
    follower.start()
    time.sleep(0.5)  # the follower has printed the first lines and is polling
    services.instance_send_event(
        instance=instance_get(workflow_name="h5-approval", instance_id="o1"), type="approve"
    )
    tick()
    follower.join(timeout=30)
    assert not follower.is_alive()
    code, out, _ = result["out"]
    assert code == 0
    assert "event 'approve' received" in out and "instance complete" in out
    lines = out.splitlines()
    assert len(lines) == len(set(lines)), "a followed log line was printed more than once"
