"""manage.py workflows: the same views on the box, by calling the command."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

import tests.workflows.test_http_support  # noqa: F401 - registers the h5-* workflows
from ops.models import AuditLog
from workflows.models import WorkflowDeployment


def run(*argv) -> str:
    out = StringIO()
    call_command("workflows", *argv, stdout=out)
    return out.getvalue()


def test_list_create_get_history(harness):
    assert "h5-ver  versions=1,2  active=1" in run("list")
    assert run("create", "-w", "h5-approval", "--id", "o1", "--params", '{"order": 3}') == (
        "created o1  active\n"
    )
    harness.run_until_idle()
    assert run("instances", "-w", "h5-approval") == "o1  waiting\n"
    out = run("get", "-w", "h5-approval", "-i", "o1", "--full")
    assert "current:  wait_for_event 'approval' waiting" in out and '"order": 3' in out
    out = run("history", "-w", "h5-approval", "-i", "o1", "--include-logs")
    assert "complete   do              prepare" in out and "waiting for approval" in out


def test_actions_and_events_are_audited_as_the_command(harness):
    run("create", "-w", "h5-approval", "--id", "o1")
    harness.run_until_idle()
    assert run("pause", "-w", "h5-approval", "-i", "o1") == "pause o1: paused\n"
    assert run("resume", "-w", "h5-approval", "-i", "o1") == "resume o1: active\n"
    out = run("send-event", "-w", "h5-approval", "-i", "o1", "-t", "approve", "--payload", "{}")
    assert out == "sent approve to o1: active\n"
    assert run("terminate", "-w", "h5-approval", "-i", "o1") == "terminate o1: terminated\n"
    assert run("restart", "-w", "h5-approval", "-i", "o1") == "restart o1: active\n"
    actors = set(AuditLog.objects.values_list("actor", flat=True))
    assert actors == {"system:manage.py"}
    assert AuditLog.objects.count() == 6


def test_activate_moves_the_pointer(db):
    assert run("activate", "-w", "h5-ver", "--version", "2") == "activated h5-ver v2\n"
    assert WorkflowDeployment.objects.get(workflow_name="h5-ver").active_version == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["get", "-w", "h5-approval", "-i", "ghost"], "instance_not_found"),
        (["create", "-w", "nope"], "workflow_not_found"),
        (["create", "-w", "h5-approval", "--params", "{"], "not valid JSON"),
        (["activate", "-w", "h5-ver", "--version", "9"], "version_not_found"),
    ],
)
def test_errors_are_command_errors_with_the_code(db, argv, message):
    with pytest.raises(CommandError, match=message):
        run(*argv)
