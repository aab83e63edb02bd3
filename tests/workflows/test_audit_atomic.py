"""Operator actions and their audit rows commit together or not at all: with the audit insert
made to fail by a real database trigger, the action leaves no change behind."""

from contextlib import contextmanager

import pytest
from django.db import connection

from tests.workflows.test_http_support import ALL_SCOPES, instance_url
from workflows import services
from workflows.models import WorkflowEvent, WorkflowInstance

pytestmark = pytest.mark.django_db(transaction=True)

SQLITE = (
    "CREATE TRIGGER vf_refuse_audit BEFORE INSERT ON audit_logs "
    "BEGIN SELECT RAISE(ABORT, 'audit is down'); END",
)
POSTGRES = (
    "CREATE FUNCTION vf_refuse_audit() RETURNS trigger AS $$ "
    "BEGIN RAISE EXCEPTION 'audit is down'; END $$ LANGUAGE plpgsql",
    "CREATE TRIGGER vf_refuse_audit BEFORE INSERT ON audit_logs "
    "FOR EACH ROW EXECUTE FUNCTION vf_refuse_audit()",
)


@contextmanager
def audit_inserts_fail():
    postgres = connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        for sql in POSTGRES if postgres else SQLITE:
            cursor.execute(sql)
    try:
        yield
    finally:
        _drop_trigger(postgres)


def _drop_trigger(postgres: bool) -> None:
    with connection.cursor() as cursor:
        if postgres:
            cursor.execute("DROP TRIGGER vf_refuse_audit ON audit_logs")
            cursor.execute("DROP FUNCTION vf_refuse_audit()")
        else:
            cursor.execute("DROP TRIGGER vf_refuse_audit")


@pytest.fixture
def ops_api(operator_api):
    return operator_api(*ALL_SCOPES, name="oncall")


def status(instance_id: str = "o1") -> str:
    return WorkflowInstance.objects.get(instance_id=instance_id).status


@pytest.mark.parametrize(
    ("start", "action"),
    [("active", "pause"), ("paused", "resume"), ("active", "terminate"), ("active", "restart")],
)
def test_an_action_whose_audit_row_fails_changes_nothing(ops_api, start, action):
    instance = services.instance_create(workflow_name="h5-approval", instance_id="o1")
    if start == "paused":
        services.instance_pause(instance=instance)
    run_before = WorkflowInstance.objects.get(instance_id="o1").run_number
    with audit_inserts_fail():
        response = ops_api.post(instance_url("o1", f"/{action}"), {}, format="json")
    assert response.status_code >= 500
    assert response.json()["code"]
    row = WorkflowInstance.objects.get(instance_id="o1")
    assert (row.status, row.run_number) == (start, run_before)


def test_an_event_whose_audit_row_fails_is_not_delivered(ops_api):
    services.instance_create(workflow_name="h5-approval", instance_id="o1")
    with audit_inserts_fail():
        response = ops_api.post(
            instance_url("o1", "/events"), {"type": "approve", "payload": {"ok": 1}}, format="json"
        )
    assert response.status_code >= 500
    assert not WorkflowEvent.objects.exists()
