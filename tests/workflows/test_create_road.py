"""One road for every create: the API's create, a batch, an idempotent create, a child of
step.run_workflow, a cron fire and instance_run_here all reach engine.create.create_instance
with a NewInstance, which carries the subject the caller named."""

import pytest

from tests.factories import UserFactory
from workflows import services, triggers, workflow
from workflows.engine import create, here
from workflows.engine.create import NewInstance
from workflows.engine.here import instance_run_here
from workflows.models import WorkflowInstance
from workflows.testing import WorkflowHarness

pytestmark = pytest.mark.django_db(transaction=True)


@workflow(name="road-leaf")
def leaf(event, step):
    return step.do("one", lambda: 1)


@workflow(name="road-parent")
def parent(event, step):
    return step.run_workflow("child", "road-leaf", params={"n": 1})


@pytest.fixture
def harness():
    with WorkflowHarness() as h:
        yield h


@pytest.fixture
def asked(monkeypatch):
    """Every NewInstance handed to create_instance, by any of the modules that create."""
    seen: list[NewInstance] = []
    real = create.create_instance
    # A version remembered from an earlier test names a deployment row the database flush
    # removed: the one statement would write nothing and the create go again by the ORM.
    monkeypatch.setattr(create, "_seen", {})

    def recording(new, lease=None):
        seen.append(new)
        return real(new, lease)

    for module in (services, triggers, here):
        monkeypatch.setattr(module, "create_instance", recording)
    return seen


def test_the_api_create_a_batch_and_an_idempotent_create_go_through_create_instance(harness, asked):
    user = UserFactory()
    services.instance_create(workflow_name="road-leaf", instance_id="a", subject=user)
    services.instance_create_batch(workflow_name="road-leaf", items=[{"id": "b"}, {"id": "c"}])
    services.instance_create_once(workflow_name="road-leaf", idempotency_key="k", instance_id="d")
    assert [(n.instance_id, n.subject) for n in asked] == [
        ("a", user.pk),
        ("b", None),
        ("c", None),
        ("d", None),
    ]
    assert WorkflowInstance.objects.filter(workflow_name="road-leaf").count() == 4


def test_a_child_is_created_through_create_instance_with_its_parent(harness, asked):
    harness.create("road-parent", id="p")
    parent_row = WorkflowInstance.objects.get(instance_id="p")
    child = [n for n in asked if n.workflow_name == "road-leaf"]
    assert len(child) == 1 and child[0].parent_pk == parent_row.pk
    assert harness.status("road-parent", "p")["status"] == "complete"


def test_a_cron_fire_creates_through_create_instance(harness, cron_fleet, asked):
    harness.run_until_idle()  # first sight: the schedule rows, nothing fired
    harness.advance("15 minutes")
    triggers.fire_due()
    fired = [n for n in asked if n.workflow_name == "cron-quarter"]
    assert len(fired) == 1 and fired[0].instance_id.startswith("cron-2026")
    assert WorkflowInstance.objects.filter(instance_id=fired[0].instance_id).exists()


def test_run_here_creates_through_create_instance_with_its_lease(harness, asked):
    done = instance_run_here(workflow_name="road-leaf", instance_id="h", threaded=False)
    assert done.outcome == "complete"
    assert [n.instance_id for n in asked] == ["h"]


def test_a_new_instance_carries_no_subject_unless_given():
    assert NewInstance(workflow_name="w").subject is None
    assert NewInstance(workflow_name="w", subject=7).subject == 7
