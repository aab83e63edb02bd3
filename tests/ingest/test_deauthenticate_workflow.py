"""A wipe deauthenticates each of the user's Terra connections through a durable
`terra-deauthenticate` instance created in the wipe's own transaction: a Terra outage (a real HTTP
stand-in answering 503) leaves it retrying and it completes once Terra answers; once complete it
keeps counts only, never a Terra user id."""

import json
from datetime import UTC, datetime

import httpx
import pytest
from django.db import transaction

from ingest.actions import do_user_wipe
from ingest.terra import client as terra_client
from ingest.workflows import WORKFLOW
from ops.models import AuditLog
from tests.factories import TerraConnectionFactory, UserFactory
from tests.graphs.standin import StandIn, answer
from workflows.models import StepStatus, WorkflowInstance, WorkflowLog, WorkflowStep
from workflows.testing import WorkflowHarness

pytestmark = pytest.mark.django_db

DEAUTH = "/v2/auth/deauthenticateUser"
ONE, TWO = "7e1e0000-d1d1-4aaa-8bbb-00000000d001", "7e1e0000-d1d1-4aaa-8bbb-00000000d002"


@pytest.fixture
def harness(db):
    with WorkflowHarness(start=datetime(2026, 3, 1, 9, 0, tzinfo=UTC)) as h:
        yield h


def deauth_instance() -> WorkflowInstance:
    return WorkflowInstance.objects.get(workflow_name=WORKFLOW)


def everything_the_instance_stored(instance: WorkflowInstance, *, params: bool = True) -> str:
    """Its params, output, error, step names/results/errors and log lines, as one text."""
    instance.refresh_from_db()
    steps = WorkflowStep.objects.filter(instance=instance).values("name", "result", "error")
    logs = WorkflowLog.objects.filter(instance=instance).values("message", "data", "step_name")
    stored = [instance.output, instance.error, list(steps), list(logs)]
    return json.dumps([instance.params, *stored] if params else stored, default=str)


def test_the_wipe_creates_the_deauthentication_in_its_own_transaction(alice, terra, harness):
    TerraConnectionFactory(user=alice, terra_user_id=ONE)
    TerraConnectionFactory(user=alice, terra_user_id=TWO)
    alice_pk = alice.pk

    counts = do_user_wipe(user=alice, actor="user:charlie")

    assert counts["terra_deauthentications"] == 2
    instance = deauth_instance()
    assert instance.instance_id == f"user-{alice_pk}" and instance.subject_id is None
    assert terra.calls("DELETE", DEAUTH) == []  # a runner does it, not the wipe


def test_a_wipe_that_rolls_back_leaves_no_deauthentication(alice, terra, harness):
    TerraConnectionFactory(user=alice, terra_user_id=ONE)
    with pytest.raises(RuntimeError), transaction.atomic():
        do_user_wipe(user=alice, actor="user:charlie")
        raise RuntimeError("the wipe's transaction fails after it")
    assert not WorkflowInstance.objects.filter(workflow_name=WORKFLOW).exists()
    harness.run_until_idle()
    assert terra.calls("DELETE", DEAUTH) == []


def test_each_connection_is_deauthenticated_and_the_finished_instance_keeps_counts_only(
    alice, terra, harness
):
    TerraConnectionFactory(user=alice, terra_user_id=ONE)
    TerraConnectionFactory(user=alice, terra_user_id=TWO)
    alice_pk = alice.pk
    do_user_wipe(user=alice, actor="user:charlie")

    harness.run_until_idle()

    asked = sorted(r.url.params["user_id"] for r in terra.calls("DELETE", DEAUTH))
    assert asked == [ONE, TWO]
    instance = deauth_instance()
    assert harness.status(WORKFLOW, instance.instance_id) == {
        "status": "complete",
        "output": {"deauthenticated": 2},
    }
    stored = everything_the_instance_stored(instance)
    assert ONE not in stored and TWO not in stored
    assert instance.params == {"user": alice_pk, "actor": "user:charlie", "connections": 2}
    audit = AuditLog.objects.get(action="terra_connection.deauthenticate")
    assert audit.metadata == {"deauthenticated": 2}
    assert audit.result == "ok" and audit.subject_id == alice_pk and audit.actor == "user:charlie"


def test_a_terra_outage_leaves_the_deauthentication_retrying_until_terra_answers(
    alice, harness, settings
):
    """Real HTTP: a stand-in that answers 503 four times, then 200."""
    terra_client.set_transport(None)
    TerraConnectionFactory(user=alice, terra_user_id=ONE)
    with StandIn([answer(503, {"message": f"maintenance for {ONE}"})] * 4 + [answer(200)]) as t:
        settings.TERRA_API_URL = f"http://{t.host}"
        do_user_wipe(user=alice, actor="user:charlie")
        harness.run_until_idle()
        instance = deauth_instance()
        for failed in range(1, 5):
            assert len(t.calls) == failed
            step = WorkflowStep.objects.get(instance=instance)
            assert step.status == StepStatus.RETRYING and step.attempts == failed
            assert harness.status(WORKFLOW, instance.instance_id)["status"] != "complete"
            # Not in the step's error (Terra's message echoed it), nor in the logs...
            assert ONE not in everything_the_instance_stored(instance, params=False)
            assert ONE in json.dumps(instance.params)  # ...only where the retries read it
            harness.advance("1 hour")  # past the backoff (capped at an hour)

    assert [(c.method, c.path) for c in t.calls] == [("DELETE", f"{DEAUTH}?user_id={ONE}")] * 5
    assert harness.status(WORKFLOW, instance.instance_id) == {
        "status": "complete",
        "output": {"deauthenticated": 1},
    }
    assert ONE not in everything_the_instance_stored(instance)


@pytest.mark.parametrize(
    ("reply", "outcome"),
    [
        (httpx.Response(404, json={"status": "error"}), {"not_found": 1}),
        (httpx.Response(400, json={"message": "bad id"}), {"refused:400": 1}),
    ],
)
def test_a_user_terra_no_longer_knows_is_done_and_a_refusal_is_recorded(
    alice, terra, harness, reply, outcome
):
    terra.on("DELETE", DEAUTH, reply)
    TerraConnectionFactory(user=alice, terra_user_id=ONE)
    do_user_wipe(user=alice, actor="user:charlie")
    harness.run_until_idle()
    assert harness.status(WORKFLOW, f"user-{AuditLog.objects.get(action='user.wipe').subject_id}")[
        "output"
    ] == (outcome)
    assert len(terra.calls("DELETE", DEAUTH)) == 1
    audit = AuditLog.objects.get(action="terra_connection.deauthenticate")
    assert audit.result == ("ok" if "not_found" in outcome else "partial")


def test_a_user_wiping_themselves_is_not_named_by_the_deauthentication(terra, harness):
    person = UserFactory(username="zq-self-wiper")
    TerraConnectionFactory(user=person, terra_user_id=ONE)
    do_user_wipe(user=person, actor="user:zq-self-wiper")
    harness.run_until_idle()
    assert "zq-self-wiper" not in everything_the_instance_stored(deauth_instance())


def test_the_demo_simulator_answers_the_deauthentication(alice, harness, monkeypatch):
    from demo import simulator

    sent: list[dict] = []
    monkeypatch.setattr(simulator, "_deliver_later", sent.extend)
    terra_client.set_transport(simulator.simulator_transport())
    try:
        TerraConnectionFactory(user=alice, terra_user_id=ONE)
        do_user_wipe(user=alice, actor="user:charlie")
        harness.run_until_idle()
    finally:
        terra_client.set_transport(None)
    assert harness.status(WORKFLOW, deauth_instance().instance_id)["output"] == {
        "deauthenticated": 1
    }
    assert [(p["type"], p["user"]["user_id"]) for p in sent] == [("deauth", ONE)]
