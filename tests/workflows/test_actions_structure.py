"""The shape of operator actions on workflows: workflows/actions.py is the only module that
writes audit rows for workflows (ingest/actions.py audits raw events, graphs' answer code audits
answers); the engine's services take no actor and no request; refusals carry their own HTTP
status and the console's eligibility comes from workflows.decisions, with no table restating
either."""

import ast
import inspect
import re
from pathlib import Path

import pytest

from workflows import recovery, services
from workflows.errors import WorkflowError

ROOT = Path(__file__).resolve().parents[2]
APPS = ("workflows", "graphs", "ingest", "labs", "ops", "demo")
# Who may write an audit row, and for what: the one module per app that audits its actions.
AUDIT_WRITERS = {"workflows/actions.py"}
WORKFLOW_AUDIT_ACTION = re.compile(r"""["'](workflow_instance|workflows?)\.[a-z_]+["']""")
WRITES_AUDIT = re.compile(r"audit_log_write|AuditLog\.objects\.(create|bulk_create|update|filter)")


def _modules(*apps: str):
    for app in apps:
        for path in sorted((ROOT / app).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "/migrations/" not in relative:
                yield relative, path.read_text()


def test_only_workflows_actions_writes_audit_rows_in_the_workflows_package():
    offenders = [
        relative
        for relative, text in _modules("workflows")
        if WRITES_AUDIT.search(text) and relative not in AUDIT_WRITERS
    ]
    assert offenders == []


def test_no_other_app_writes_an_audit_row_about_a_workflow():
    offenders = [
        relative
        for relative, text in _modules(*APPS)
        if relative not in AUDIT_WRITERS
        and WRITES_AUDIT.search(text)
        and WORKFLOW_AUDIT_ACTION.search(text)
    ]
    assert offenders == []


def test_nothing_finds_its_audit_row_again_by_the_largest_id():
    offenders = [
        relative for relative, text in _modules(*APPS) if 'Max("id")' in text and "AuditLog" in text
    ]
    assert offenders == []


OPERATOR_SERVICES = [
    services.instance_pause,
    services.instance_resume,
    services.instance_terminate,
    services.instance_restart,
    services.instance_send_event,
    services.workflow_version_activate,
    services.instance_create,
    services.instance_create_batch,
    recovery.instance_retry_now,
    recovery.instance_skip_wait,
]


@pytest.mark.parametrize("service", OPERATOR_SERVICES, ids=lambda f: f.__name__)
def test_engine_services_take_no_actor_and_no_request(service):
    assert {"actor", "request"} & set(inspect.signature(service).parameters) == set()


def _names_assigned(relative: str) -> set[str]:
    tree = ast.parse((ROOT / relative).read_text())
    return {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def test_no_table_restates_error_statuses_or_eligibility():
    assert "STATUS_BY_CODE" not in _names_assigned("workflows/http/views.py")
    assert "ELIGIBLE" not in _names_assigned("workflows/admin.py")
    assert not (ROOT / "workflows/http/operations.py").exists()


def _error_classes(cls=WorkflowError):
    for sub in cls.__subclasses__():
        yield sub
        yield from _error_classes(sub)


@pytest.mark.parametrize("error", list(_error_classes()), ids=lambda c: c.__name__)
def test_every_workflow_error_carries_its_code_and_http_status(error):
    assert error.code != WorkflowError.code and 400 <= error.status < 500
