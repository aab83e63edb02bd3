"""Priorities and concurrency caps through the harness, the programmatic API and the
HTTP create, on SQLite and PostgreSQL. "Running" = claimed by a runner: the tests hold claims
with claim_next (as a busy runner would) and look at what else can be claimed."""

from datetime import timedelta

import pytest

from tests.workflows.test_http_support import ALL_SCOPES, new_key
from workflows import get_workflow, services
from workflows.engine.claim import claim_next, next_due_at
from workflows.errors import InvalidPriority
from workflows.models import WorkflowInstance, WorkflowTask


def claim(owner="busy-runner"):
    """Claim one due task without running it (a runner in the middle of a step)."""
    got = claim_next(owner=owner, lease_seconds=30)
    return None if got is None else got[1].instance_id


def claim_all() -> list[str]:
    ids = []
    while (got := claim()) is not None:
        ids.append(got)
    return ids


# -- priority -------------------------------------------------------------------------------


def test_new_runs_start_higher_priority_first_then_oldest(harness):
    for instance_id, priority in [("p1", 1), ("p9-old", 9), ("p5", 5), ("p0", 0)]:
        services.instance_create(workflow_name="noop3", instance_id=instance_id, priority=priority)
        harness.runtime.advance(timedelta(seconds=1))
    services.instance_create(workflow_name="noop3", instance_id="p9-young", priority=9)
    services.instance_create(workflow_name="noop3", instance_id="default")  # priority 5
    assert claim_all() == ["p9-old", "p9-young", "p5", "default", "p1", "p0"]


def test_tasks_due_at_the_same_time_are_claimed_oldest_first(harness):
    """Equal priority and due time: the older task goes first, whatever the physical order of
    the rows (on PostgreSQL an updated row moves; the index alone would order ties by where
    each row version sits)."""
    for instance_id in ("first", "second", "third"):
        services.instance_create(workflow_name="noop3", instance_id=instance_id)
    due = harness.runtime.now() + timedelta(seconds=5)
    for instance_id in ("third", "first", "second"):  # rewritten newest first
        WorkflowTask.objects.filter(instance__instance_id=instance_id).update(run_at=due)
    harness.runtime.advance(timedelta(seconds=5))
    assert claim_all() == ["first", "second", "third"]


def test_wakes_still_go_before_new_runs_of_the_highest_priority(harness):
    services.instance_create(workflow_name="sleepy", instance_id="sleeper", priority=0)
    harness.run_until_idle()  # sleeps 1 s
    harness.runtime.advance(timedelta(seconds=2))
    services.instance_create(workflow_name="noop3", instance_id="urgent", priority=9)
    assert claim_all() == ["sleeper", "urgent"]


def test_retries_events_and_resumes_also_go_before_new_runs(harness, tmp_path):
    marker = str(tmp_path / "first-attempt")
    services.instance_create(
        workflow_name="wake-retry", instance_id="retried", priority=0, params={"marker": marker}
    )
    services.instance_create(workflow_name="wake-event", instance_id="evented", priority=0)
    services.instance_create(workflow_name="noop3", instance_id="paused", priority=0)
    harness.pause("noop3", "paused")
    harness.run_until_idle()  # retried: first attempt failed, retry due in 1 s; evented waits
    harness.runtime.advance(timedelta(seconds=2))
    harness.send_event("wake-event", "evented", "go", run=False)
    harness.resume("noop3", "paused", run=False)
    services.instance_create(workflow_name="noop3", instance_id="urgent", priority=9)
    assert claim_all() == ["retried", "evented", "paused", "urgent"]  # then by due time, age


def test_restart_keeps_the_instance_priority(harness):
    services.instance_create(workflow_name="noop3", instance_id="low", priority=1)
    services.instance_create(workflow_name="noop3", instance_id="high", priority=8)
    harness.run_until_idle()
    harness.restart("noop3", "low", run=False)
    harness.runtime.advance(timedelta(seconds=1))
    harness.restart("noop3", "high", run=False)
    assert claim_all() == ["high", "low"]


@pytest.mark.parametrize("bad", [-1, 10, 2.5, "9", True, None])
def test_priority_outside_0_to_9_is_a_clear_error(harness, bad):
    with pytest.raises(InvalidPriority, match="priority must be an integer from 0 to 9"):
        services.instance_create(workflow_name="noop3", instance_id="x", priority=bad)
    with pytest.raises(InvalidPriority):
        get_workflow("noop3").create(id="y", priority=bad)
    assert not WorkflowInstance.objects.exists()


def test_programmatic_create_takes_a_priority(harness):
    get_workflow("noop3").create(id="a", priority=2)
    get_workflow("noop3").create(id="b", priority=7)
    assert WorkflowInstance.objects.get(instance_id="b").priority == 7
    assert claim_all() == ["b", "a"]


@pytest.fixture
def ops_api(operator_api):
    return operator_api(*ALL_SCOPES, name="oncall")


def post_create(api, body, name="noop3"):
    return api.post(
        f"/v1/workflows/{name}/instances", body, format="json", HTTP_IDEMPOTENCY_KEY=new_key()
    )


def test_http_create_takes_a_priority(ops_api, harness):
    assert post_create(ops_api, {"id": "low", "priority": 0}).status_code == 201
    assert post_create(ops_api, {"id": "high", "priority": 9}).status_code == 201
    assert post_create(ops_api, {"id": "mid"}).status_code == 201
    assert claim_all() == ["high", "mid", "low"]


@pytest.mark.parametrize("bad", [10, -1, "high", 1.5, True, None, [1]])
def test_http_create_refuses_a_bad_priority_with_400(ops_api, bad):
    response = post_create(ops_api, {"id": "x", "priority": bad})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_priority"
    assert "0 to 9" in response.json()["message"]
    assert not WorkflowInstance.objects.exists()


def test_http_batch_items_take_a_priority(ops_api, harness):
    response = ops_api.post(
        "/v1/workflows/noop3/instances/batch",
        {"instances": [{"id": "a", "priority": 1}, {"id": "b", "priority": 9}]},
        format="json",
        HTTP_IDEMPOTENCY_KEY=new_key(),
    )
    assert response.status_code == 201
    assert claim_all() == ["b", "a"]
    bad = ops_api.post(
        "/v1/workflows/noop3/instances/batch",
        {"instances": [{"id": "c", "priority": 11}]},
        format="json",
        HTTP_IDEMPOTENCY_KEY=new_key(),
    )
    assert (bad.status_code, bad.json()["code"]) == (400, "invalid_priority")


# -- concurrency caps -----------------------------------------------------------------------


def test_a_capped_workflow_runs_at_most_n_at_once_and_the_rest_stay_queued(harness, fleet):
    for n in range(5):
        services.instance_create(workflow_name="fleet-capped", instance_id=f"c{n}")
    services.instance_create(workflow_name="noop3", instance_id="free")
    assert claim_all() == ["c0", "c1", "free"]  # cap 2; uncapped work is not held back
    statuses = dict(WorkflowInstance.objects.values_list("instance_id", "status"))
    assert {statuses[f"c{n}"] for n in range(5)} == {"active"}  # queued, not rejected


def test_queued_runs_start_as_slots_free(harness, fleet):
    for n in range(4):
        services.instance_create(workflow_name="fleet-capped", instance_id=f"c{n}")
    harness.run_until_idle()  # one runner: each runs to completion, freeing its slot
    assert set(WorkflowInstance.objects.values_list("status", flat=True)) == {"complete"}


def test_a_slot_frees_when_the_runner_lease_lapses(harness, fleet):
    for n in range(3):
        services.instance_create(workflow_name="fleet-capped", instance_id=f"c{n}")
        harness.runtime.advance(timedelta(seconds=1))
    assert claim_all() == ["c0", "c1"]
    harness.runtime.advance(timedelta(seconds=31))  # both runners died: leases lapse
    assert claim_all() == ["c0", "c1"]  # the oldest runs again, still two at once


def test_waiting_paused_and_finished_instances_hold_no_slot(harness, fleet):
    for n in range(3):
        services.instance_create(workflow_name="fleet-capped-sleeper", instance_id=f"s{n}")
    harness.run_until_idle()  # cap 1, yet all three reach their sleep one after another
    assert set(WorkflowInstance.objects.values_list("status", flat=True)) == {"waiting"}
    services.instance_create(workflow_name="fleet-capped", instance_id="a")
    services.instance_create(workflow_name="fleet-capped", instance_id="b")
    harness.run_until_idle()
    services.instance_create(workflow_name="fleet-capped", instance_id="c")
    services.instance_create(workflow_name="fleet-capped", instance_id="d")
    harness.pause("fleet-capped", "c")
    assert claim_all() == ["d"]  # complete a, b and paused c do not count against the cap 2


def test_wakes_of_a_capped_workflow_also_wait_for_a_slot(harness, fleet):
    for n in range(2):
        services.instance_create(workflow_name="fleet-capped-sleeper", instance_id=f"s{n}")
    harness.run_until_idle()
    harness.runtime.advance(timedelta(hours=2))
    assert claim_all() == ["s0"]  # both woke; cap 1
    assert next_due_at() is None  # a runner does not spin on s1 while the slot is taken


def test_a_concurrency_key_caps_per_param_value(harness, fleet):
    for n, user in enumerate(["ann", "ann", "bob", "ann", "bob"]):
        services.instance_create(
            workflow_name="fleet-per-user", instance_id=f"u{n}", params={"user": user}
        )
    services.instance_create(workflow_name="fleet-per-user", instance_id="nobody")
    assert claim_all() == ["u0", "u2", "nobody"]  # one per user; a missing key is its own


def test_get_workflow_shows_the_cap_with_running_and_queued_per_key(ops_api, harness, fleet):
    for n, user in enumerate(["ann", "ann", "bob"]):
        services.instance_create(
            workflow_name="fleet-per-user", instance_id=f"u{n}", params={"user": user}
        )
    assert claim() == "u0" and claim() == "u2"
    body = ops_api.get("/v1/workflows/fleet-per-user").json()
    assert body["concurrency"] == {
        "limit": 1,
        "key": "user",
        "running": 2,
        "queued": 1,
        "by_key": {"ann": {"running": 1, "queued": 1}, "bob": {"running": 1, "queued": 0}},
    }
    assert (body["running"], body["queued"]) == (2, 1)


def test_a_bad_cap_is_a_definition_error():
    from workflows import workflow
    from workflows.errors import InvalidWorkflowDefinition

    for kwargs in ({"concurrency": 0}, {"concurrency": "2"}, {"concurrency_key": "user"}):
        with pytest.raises(InvalidWorkflowDefinition):
            workflow(name="never-registered", **kwargs)
