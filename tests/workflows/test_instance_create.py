"""Creating an instance: on PostgreSQL outside a transaction it is one statement in
one round trip (workflows.engine.create); on both databases it keeps its rules — the active
version (also one an operator or another process activated since the last create), a refused
duplicate id that writes nothing, labels, priority, params, request id and concurrency slot
stored, due at once, a NOTIFY and a wake task only when something was created, the audit row,
and rolling back with an outer transaction. Counts, never times."""

import pytest
from django.db import connection, transaction

from ops.models import AuditLog
from ops.request_id import reset_request_id, set_request_id
from workflows import services, workflow
from workflows.authoring import registry
from workflows.engine import run_one, wake
from workflows.engine.claim import claim_next
from workflows.errors import (
    InstanceIdAlreadyExists,
    InvalidLabels,
    InvalidPayload,
    NoActiveDeployment,
    WorkflowNotFound,
)
from workflows.models import (
    WorkflowDeployment,
    WorkflowInstance,
    WorkflowInstanceLabel,
    WorkflowTask,
    start_priority,
)
from workflows.testing import WorkflowHarness

# Outside any transaction, like a script, a cron-less client or the bench: the one-statement path
# on PostgreSQL, the ORM path on SQLite; the same behaviour either way.
pytestmark = pytest.mark.django_db(transaction=True)


@workflow(name="t-create", version=1)
def create_v1(event, step):
    return step.do("which", lambda: "v1")


@workflow(name="t-create", version=2)
def create_v2(event, step):
    return step.do("which", lambda: "v2")


@workflow(name="t-create-gone")
def create_gone(event, step):
    return step.do("only", lambda: 1)


@pytest.fixture
def harness():
    with WorkflowHarness() as h:
        yield h


def _create(instance_id, **kwargs):
    return services.instance_create(workflow_name="t-create", instance_id=instance_id, **kwargs)


def _version(instance_id) -> int:
    return WorkflowInstance.objects.get(instance_id=instance_id).version


def test_the_returned_instance_is_the_stored_row_of_the_active_version(harness):
    made = _create("a", params={"n": 1})
    row = WorkflowInstance.objects.get(pk=made.pk)
    assert (row.workflow_name, row.instance_id, row.version) == ("t-create", "a", 1)
    assert (row.status, row.run_number, row.params) == ("active", 1, {"n": 1})
    assert made.instance_id == "a" and made.version == 1 and not made._state.adding
    assert services.instance_pause(instance=made).status == "paused"  # callers use it as a row


def test_a_version_activated_by_an_operator_between_two_creates_is_honoured(harness):
    _create("first")
    services.workflow_version_activate(name="t-create", version=2)
    _create("second")
    assert (_version("first"), _version("second")) == (1, 2)
    harness.run_until_idle()
    assert harness.status("t-create", "second")["output"] == "v2"


def test_a_version_activated_by_another_process_between_two_creates_is_honoured(harness):
    _create("first")
    # Another process (a console, a deploy) moves the pointer: nothing in this process knows.
    WorkflowDeployment.objects.filter(workflow_name="t-create").update(active_version=2)
    _create("second")
    WorkflowDeployment.objects.filter(workflow_name="t-create").update(active_version=1)
    _create("third")
    assert [_version(i) for i in ("first", "second", "third")] == [1, 2, 1]


def test_a_workflow_deactivated_after_a_create_refuses_the_next(harness):
    _create("first")
    WorkflowDeployment.objects.filter(workflow_name="t-create").update(active_version=None)
    with pytest.raises(NoActiveDeployment):
        _create("second")
    assert list(WorkflowInstance.objects.values_list("instance_id", flat=True)) == ["first"]
    assert WorkflowTask.objects.count() == 1


def test_an_active_version_no_longer_registered_refuses_the_next_create(harness):
    services.instance_create(workflow_name="t-create-gone", instance_id="first")
    definition = registry.get("t-create-gone", 1)
    workflow(name="t-create-gone", version=2)(create_gone)
    registry.unregister("t-create-gone", 1)  # a deploy dropped v1, the pointer still says v1
    try:
        with pytest.raises(NoActiveDeployment):
            services.instance_create(workflow_name="t-create-gone", instance_id="second")
    finally:
        registry.register(definition)
        registry.unregister("t-create-gone", 2)
    assert WorkflowInstance.objects.count() == 1


def test_the_pointer_is_created_on_first_use_even_after_earlier_creates_in_this_process(harness):
    _create("first")
    WorkflowDeployment.objects.all().delete()  # e.g. another database, a wiped table
    _create("second")
    assert WorkflowDeployment.objects.get(workflow_name="t-create").active_version == 1
    assert _version("second") == 1


def test_an_unknown_workflow_is_refused(harness):
    with pytest.raises(WorkflowNotFound):
        services.instance_create(workflow_name="t-create-nope", instance_id="x")
    assert WorkflowInstance.objects.count() == 0


def test_a_duplicate_instance_id_raises_and_writes_nothing(harness):
    _create("d", params={"n": 1}, labels={"team": "a"}, priority=2)
    with pytest.raises(InstanceIdAlreadyExists):
        _create("d", params={"n": 2}, labels={"other": "b"}, priority=9)
    row = WorkflowInstance.objects.get()
    assert (row.params, row.labels, row.priority) == ({"n": 1}, {"team": "a"}, 2)
    assert WorkflowTask.objects.count() == 1
    assert list(WorkflowInstanceLabel.objects.values_list("key", "value")) == [("team", "a")]


def test_labels_priority_params_and_request_id_are_stored(harness):
    token = set_request_id("req-create-1")
    try:
        made = _create(
            "l", params={"user": "alice", "n": [1, 2]}, labels={"b": "2", "a": "1"}, priority=8
        )
    finally:
        reset_request_id(token)
    row = WorkflowInstance.objects.get(pk=made.pk)
    assert row.labels == {"a": "1", "b": "2"} and row.priority == 8
    assert row.params == {"user": "alice", "n": [1, 2]} and row.request_id == "req-create-1"
    rows = WorkflowInstanceLabel.objects.filter(instance=row).values_list("key", "value")
    assert sorted(rows) == [("a", "1"), ("b", "2")]
    task = WorkflowTask.objects.get(instance=row)
    assert (task.kind, task.run_number, task.priority) == ("start", 1, start_priority(8))
    assert (task.lock_owner, task.locked_until, task.fencing_token, task.claims) == ("", None, 0, 0)
    assert (task.concurrency_group, task.concurrency_limit) == ("", None)


def test_no_params_and_no_labels_store_null_and_an_empty_object(harness):
    _create("n")
    assert WorkflowInstance.objects.filter(params__isnull=True, labels={}).count() == 1
    assert WorkflowInstanceLabel.objects.count() == 0


def test_a_capped_workflow_task_carries_its_slot_group_and_cap(harness, fleet):
    services.instance_create(
        workflow_name="fleet-per-user", instance_id="u1", params={"user": "bob"}
    )
    services.instance_create(workflow_name="fleet-capped", instance_id="c1")
    fields = dict(WorkflowTask.objects.values_list("instance__instance_id", "concurrency_group"))
    assert fields == {"u1": "fleet-per-user/bob", "c1": "fleet-capped"}
    assert sorted(WorkflowTask.objects.values_list("concurrency_limit", flat=True)) == [1, 2]


def test_invalid_params_labels_or_priority_write_nothing(harness):
    _create("ok")  # the version is known to this process: the fast path's checks are the same
    with pytest.raises(InvalidPayload):
        _create("p", params={"x": float("nan")})
    with pytest.raises(InvalidLabels):
        _create("l", labels={"bad key": "v"})
    with pytest.raises(Exception, match="priority"):
        _create("q", priority=11)
    assert list(WorkflowInstance.objects.values_list("instance_id", flat=True)) == ["ok"]


def test_the_first_task_is_due_at_once_by_the_harness_clock(harness):
    _create("h")
    assert WorkflowTask.objects.get().run_at == harness.now()


def test_the_first_task_is_due_at_once_for_a_runner_right_after(settings):
    settings.WORKFLOWS_WAKE_TASKS = False
    _create("warm")
    assert run_one(owner="r", threaded=False) == "complete"
    _create("due")
    claim, loaded = claim_next(owner="r", lease_seconds=30)
    assert claim is not None and loaded.instance_id == "due"


def test_an_audited_create_writes_its_audit_row(harness):
    from workflows.actions import do_create

    do_create(workflow_name="t-create", instance_id="au", actor="user:alice")
    audit = AuditLog.objects.get(action="workflow_instance.create")
    assert audit.actor == "user:alice" and audit.resource == "workflow_instance:t-create/au"


def test_an_unaudited_create_writes_no_audit_row(harness):
    _create("quiet")
    assert not AuditLog.objects.filter(action="workflow_instance.create").exists()


def test_inside_an_outer_transaction_a_create_rolls_back_with_it(harness):
    _create("warm")

    class Boom(Exception):
        pass

    with pytest.raises(Boom), transaction.atomic():
        _create("inner", labels={"k": "v"})
        raise Boom
    assert list(WorkflowInstance.objects.values_list("instance_id", flat=True)) == ["warm"]
    assert WorkflowTask.objects.count() == 1 and WorkflowInstanceLabel.objects.count() == 0


def test_a_wake_task_is_enqueued_after_a_create_and_not_for_a_refused_one(harness, monkeypatch):
    enqueued = []
    monkeypatch.setattr(wake, "_enqueue_wake", lambda: enqueued.append(1))
    monkeypatch.setattr(wake, "wake_enabled", lambda: True)
    _create("w1")
    _create("w2")
    assert len(enqueued) == 2
    with pytest.raises(InstanceIdAlreadyExists):
        _create("w2")
    with transaction.atomic():
        _create("w3")
        assert len(enqueued) == 2  # inside a transaction: only once it commits
    assert len(enqueued) == 3


# -- PostgreSQL: one round trip and the runners' notification ------------------------------------


@pytest.mark.postgres_only
def test_outside_a_transaction_a_create_is_one_statement_in_one_round_trip(harness):
    from bench.pgcost import RoundTrips

    _create("warm")  # this process learns the active version
    trips = RoundTrips().install()
    try:
        _create("counted", params={"n": 1}, labels={"team": "a"})
    finally:
        trips.uninstall()
    assert (trips.get("-", "statements"), trips.get("-", "round trips")) == (1, 1)
    assert WorkflowInstanceLabel.objects.get().key == "team"


@pytest.mark.postgres_only
def test_a_create_notifies_idle_runners_on_commit_and_a_refused_one_does_not(harness):
    import psycopg

    from workflows.engine.store import CHANNEL

    _create("warm")
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANNEL}")
        _create("heard")
        heard = list(listener.notifies(timeout=5, stop_after=1))
        assert [n.channel for n in heard] == [CHANNEL]
        with pytest.raises(InstanceIdAlreadyExists):
            _create("heard")
        _create("next")
        # Whatever arrives within a second: one notification, the create's; none was sent for
        # the refused one.
        heard = list(listener.notifies(timeout=1, stop_after=2))
    assert [n.channel for n in heard] == [CHANNEL]
