"""A waiting human node accepts exactly one answer: one 200, every later or concurrent answer a
409 naming the accepted one (who, when, which decision); the answer, its engine event and its
audit row commit together or not at all (a failing audit insert stores nothing)."""

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.core.servers.basehttp import ThreadedWSGIServer
from django.db import connection
from django.test.testcases import LiveServerThread, _StaticFilesHandler

from graphs import answers
from graphs.models import GraphAnswer
from ops.models import AuditLog
from ops.services import api_key_create
from tests.graphs.conftest import START
from tests.graphs.test_approvals import answer, outcome, publish_binding, waiting_run
from workflows.models import WorkflowEvent
from workflows.testing import WorkflowHarness

APPROVE = ("graphs:read", "graphs:run", "graphs:approve")


def test_a_second_answer_is_409_naming_the_accepted_one(operator_api, harness):
    publish_binding()
    run = waiting_run(harness)
    first = operator_api(*APPROVE, name="dr-a")
    second = operator_api(*APPROVE, name="dr-b")

    accepted = answer(first, run, approved=False)
    late = answer(second, run, approved=True)  # before the runner has taken the first
    assert accepted.status_code == 200
    assert late.status_code == 409 and late.json()["code"] == "already_answered"
    named = late.json()["answer"]
    assert named["by"].endswith(":dr-a") and named["decision"] == "reject"
    assert named["token"] == "0" and named["node"] == "ask" and named["at"]

    assert outcome(harness, run) == "rejected"
    after = answer(second, run, approved=True)  # the node has moved on
    assert after.status_code == 409 and after.json()["answer"] == named
    untargeted = answer(second, run, approved=True, token=None)
    assert untargeted.status_code == 409 and untargeted.json()["answer"] == named
    assert GraphAnswer.objects.count() == 1
    assert AuditLog.objects.filter(action="graph_run.send_event").count() == 1


def test_an_answer_without_a_token_takes_the_waiting_node_once(operator_api, harness):
    publish_binding()
    run = waiting_run(harness)
    key = operator_api(*APPROVE)
    assert answer(key, run, token=None).status_code == 200
    again = answer(key, run, approved=False, token=None)
    assert again.status_code == 409 and again.json()["answer"]["decision"] == "approve"
    assert outcome(harness, run) == "approved"


def test_an_answer_to_a_node_that_is_not_waiting_is_409(operator_api, harness):
    publish_binding()
    run = waiting_run(harness)
    key = operator_api(*APPROVE)
    wrong = answer(key, run, token="7")
    assert wrong.status_code == 409 and wrong.json()["code"] == "no_waiting_human"
    other_type = key.post(
        f"/v1/graphs/runs/{run.run_id}/events", {"type": "other", "payload": {}}, format="json"
    )
    assert other_type.status_code == 409 and other_type.json()["code"] == "no_waiting_human"
    assert not GraphAnswer.objects.exists()


# -- the answer and its audit row: one transaction ------------------------------------------------

AUDIT_DOWN = {
    "sqlite": [
        "CREATE TRIGGER audit_down BEFORE INSERT ON audit_logs "
        "WHEN NEW.action = 'graph_run.send_event' "
        "BEGIN SELECT RAISE(ABORT, 'the audit log is down'); END",
    ],
    "postgresql": [
        "CREATE FUNCTION audit_down() RETURNS trigger AS $$ BEGIN "
        "IF NEW.action = 'graph_run.send_event' THEN RAISE EXCEPTION 'the audit log is down'; "
        "END IF; RETURN NEW; END $$ LANGUAGE plpgsql",
        "CREATE TRIGGER audit_down BEFORE INSERT ON audit_logs "
        "FOR EACH ROW EXECUTE FUNCTION audit_down()",
    ],
}
AUDIT_UP = {
    "sqlite": ["DROP TRIGGER IF EXISTS audit_down"],
    "postgresql": [
        "DROP TRIGGER IF EXISTS audit_down ON audit_logs",
        "DROP FUNCTION IF EXISTS audit_down()",
    ],
}


def _execute(statements):
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)


@pytest.fixture
def audit_down(transactional_db):
    """The database refuses audit rows of answers (a trigger), until `up()` is called."""
    _execute(AUDIT_DOWN[connection.vendor])
    state = {"down": True}

    def up():
        if state["down"]:
            _execute(AUDIT_UP[connection.vendor])
            state["down"] = False

    yield up
    up()


@pytest.fixture
def committing_harness(transactional_db):
    with WorkflowHarness(start=START) as h:
        yield h


@pytest.mark.parametrize("idempotency_key", [None, "answer-1"])
def test_an_answer_whose_audit_row_cannot_be_written_is_not_stored(
    operator_api, committing_harness, audit_down, idempotency_key
):
    harness = committing_harness
    publish_binding()
    run = waiting_run(harness)
    key = operator_api(*APPROVE)
    headers = {"HTTP_IDEMPOTENCY_KEY": idempotency_key} if idempotency_key else {}
    body = {"type": "ack", "payload": {"approved": True}, "token": "0"}
    path = f"/v1/graphs/runs/{run.run_id}/events"

    failed = key.post(path, body, format="json", **headers)

    assert failed.status_code == 500 and failed.json()["code"] == "server_error"
    assert not WorkflowEvent.objects.filter(instance=run.instance).exists()
    assert not GraphAnswer.objects.exists()
    assert not AuditLog.objects.filter(action="graph_run.send_event").exists()

    audit_down()  # the audit log is back: the retry the 500 invited is the one answer
    retried = key.post(path, body, format="json", **headers)
    assert retried.status_code == 200, retried.json()
    assert WorkflowEvent.objects.filter(instance=run.instance).count() == 1
    assert AuditLog.objects.filter(action="graph_run.send_event").count() == 1
    assert outcome(harness, run) == "approved"


# -- real concurrency on PostgreSQL ---------------------------------------------------------------


class _RoomyServer(ThreadedWSGIServer):
    request_queue_size = 128  # every caller connects at once; the default backlog is 10


class _RoomyLiveServerThread(LiveServerThread):
    server_class = _RoomyServer


@pytest.fixture
def live_url(transactional_db):
    thread = _RoomyLiveServerThread("127.0.0.1", static_handler=_StaticFilesHandler)
    thread.daemon = True
    thread.start()
    thread.is_ready.wait()
    if thread.error:
        raise thread.error
    yield f"http://127.0.0.1:{thread.port}"
    thread.terminate()


CALLERS = 20


@pytest.mark.postgres_only
def test_twenty_concurrent_answers_to_one_token_get_one_200_and_the_run_takes_its_path(
    live_url, committing_harness
):
    harness = committing_harness
    publish_binding()
    run = waiting_run(harness)
    raw_keys = [
        api_key_create(name=f"clinician-{i}", scopes=list(APPROVE))[1] for i in range(CALLERS)
    ]
    barrier = threading.Barrier(CALLERS)

    def call(i):
        body = {"type": "ack", "payload": {"approved": i % 2 == 0}, "token": "0"}
        with httpx.Client(base_url=live_url, timeout=60) as client:
            barrier.wait()
            return client.post(
                f"/v1/graphs/runs/{run.run_id}/events",
                json=body,
                headers={"X-Admin-Key": raw_keys[i]},
            )

    with ThreadPoolExecutor(max_workers=CALLERS) as pool:
        responses = list(pool.map(call, range(CALLERS)))

    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] + [409] * (CALLERS - 1), statuses
    accepted = next(r.json()["answer"] for r in responses if r.status_code == 200)
    for refused in (r for r in responses if r.status_code == 409):
        assert refused.json()["code"] == "already_answered"
        assert refused.json()["answer"] == accepted
    assert GraphAnswer.objects.count() == 1
    assert WorkflowEvent.objects.filter(instance=run.instance).count() == 1
    assert AuditLog.objects.filter(action="graph_run.send_event").count() == 1
    expected = {"approve": "approved", "reject": "rejected"}[accepted["decision"]]
    assert outcome(harness, run) == expected


def test_answers_service_names_the_run_it_answered(harness):
    publish_binding()
    run = waiting_run(harness)
    stored = answers.run_answer(run_id=run.run_id, type="ack", payload={"approved": True})
    assert stored.run_id == run.pk and stored.actor == "system" and stored.decision == "approve"
