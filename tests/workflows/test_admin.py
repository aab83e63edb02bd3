"""The workflows console in the Django admin: lists, the instance timeline, actions on
eligible rows with confirmation, send event, and the overview with activate version."""

from datetime import timedelta

import pytest
from django.urls import reverse

from ops.models import AuditLog
from tests.workflows.test_http_support import READ  # noqa: F401 - registers the h5-* workflows
from workflows import services
from workflows.models import WorkflowDeployment, WorkflowEvent, WorkflowInstance

CHANGELIST = "/admin/workflows/workflowinstance/"
OVERVIEW = "/admin/workflows/workflowdeployment/"


@pytest.fixture
def console(client, staff):
    client.force_login(staff)
    return client


@pytest.fixture
def three(harness):
    """w1 waiting, p1 paused, t1 terminated (all h5-approval)."""
    for instance_id in ("w1", "p1", "t1"):
        harness.create("h5-approval", id=instance_id, params={"order": instance_id})
    harness.pause("h5-approval", "p1")
    harness.terminate("h5-approval", "t1")
    return {i.instance_id: i for i in WorkflowInstance.objects.all()}


def status_of(instance_id: str) -> str:
    return WorkflowInstance.objects.get(instance_id=instance_id).status


def bulk(console, action, rows, **extra):
    return console.post(
        CHANGELIST,
        {"action": action, "_selected_action": [r.pk for r in rows], **extra},
        follow=True,
    )


def test_the_list_shows_status_first_and_filters_and_searches(console, three):
    page = console.get(CHANGELIST).content.decode()
    assert page.index("column-status_badge") < page.index("column-workflow_name")
    for query, shown, hidden in [
        ("?status__exact=paused", "p1", "w1"),
        ("?workflow_name=h5-approval&version=1", "w1", "nope"),
        ("?q=t1", "t1", "w1"),
        ("?age=1h", "w1", "nope"),
    ]:
        content = console.get(CHANGELIST + query).content.decode()
        assert f">{shown}<" in content, query
        assert f">{hidden}<" not in content, query


def test_the_age_filter_measures_on_the_engine_clock(console, three, harness):
    harness.runtime.advance(timedelta(days=8))
    assert ">w1<" in console.get(CHANGELIST + "?age=old").content.decode()
    assert ">w1<" not in console.get(CHANGELIST + "?age=7d").content.decode()


def test_the_instance_page_shows_a_timeline_with_replays_marked(console, harness):
    harness.create("h5-approval", id="o1", params={"order": 5})
    harness.send_event("h5-approval", "o1", "approve", {"by": "ann"})
    pk = WorkflowInstance.objects.get(instance_id="o1").pk
    page = console.get(f"{CHANGELIST}{pk}/change/").content.decode()
    assert "complete" in page
    assert "step (do)" in page and "prepare" in page
    assert "step (wait_for_event)" in page and ">event<" in page
    assert "waiting for approval" in page and "(replay)" in page
    assert "&quot;order&quot;: 5" in page  # params pretty-printed
    assert "&quot;approved_by&quot;: &quot;ann&quot;" in page  # output pretty-printed


def test_bulk_pause_touches_only_eligible_rows_and_counts(console, three):
    response = bulk(console, "pause_selected", three.values())
    assert "Pause: 1 instance(s) done, 2 not eligible skipped." in response.content.decode()
    assert (status_of("w1"), status_of("p1"), status_of("t1")) == ("paused", "paused", "terminated")
    row = AuditLog.objects.get(action="workflow_instance.pause")
    assert (row.actor, row.resource) == ("user:charlie", "workflow_instance:h5-approval/w1")


def test_bulk_resume(console, three):
    response = bulk(console, "resume_selected", three.values())
    assert "Resume: 1 instance(s) done, 2 not eligible skipped." in response.content.decode()
    assert status_of("p1") == "active"


def test_bulk_terminate_asks_for_confirmation_first(console, three):
    page = bulk(console, "terminate_selected", three.values()).content.decode()
    assert "Terminate 2 instance(s)?" in page
    assert "1 selected are not eligible" in page
    assert status_of("w1") == "waiting"
    response = bulk(console, "terminate_selected", three.values(), confirm="yes")
    assert "Terminate: 2 instance(s) done, 1 not eligible skipped." in response.content.decode()
    assert (status_of("w1"), status_of("p1")) == ("terminated", "terminated")
    assert AuditLog.objects.filter(action="workflow_instance.terminate").count() == 2


def test_bulk_restart_needs_confirmation_and_starts_new_runs(console, three):
    assert (
        "Restart 3 instance(s)?"
        in bulk(console, "restart_selected", three.values()).content.decode()
    )
    bulk(console, "restart_selected", three.values(), confirm="yes")
    assert set(WorkflowInstance.objects.values_list("run_number", flat=True)) == {2}


def test_single_actions_from_the_instance_page(console, three):
    url = reverse("admin:workflows_instance_action", args=[three["w1"].pk, "pause"])
    response = console.post(url, follow=True)
    assert "Pause: 1 instance, now paused." in response.content.decode()
    terminate = reverse("admin:workflows_instance_action", args=[three["w1"].pk, "terminate"])
    assert "Terminate w1?" in console.post(terminate).content.decode()
    assert status_of("w1") == "paused"
    console.post(terminate, {"confirm": "yes"})
    assert status_of("w1") == "terminated"


def test_a_refused_single_action_says_why(console, three):
    url = reverse("admin:workflows_instance_action", args=[three["t1"].pk, "pause"])
    page = console.post(url, follow=True).content.decode()
    assert "Pause refused: instance_terminal" in page
    assert AuditLog.objects.get().result == "instance_terminal"


def test_send_event_form(console, three, harness):
    url = reverse("admin:workflows_instance_send_event", args=[three["w1"].pk])
    assert "Send event to w1" in console.get(url).content.decode()
    bad = console.post(url, {"type": "approve", "payload": "{nope"}).content.decode()
    assert "payload is not valid JSON" in bad
    invalid = console.post(url, {"type": "bad type!", "payload": ""}).content.decode()
    assert "invalid_event_type" in invalid
    response = console.post(url, {"type": "approve", "payload": '{"by": "cc"}'}, follow=True)
    assert "Sent 1 event &#x27;approve&#x27; to w1." in response.content.decode()
    assert WorkflowEvent.objects.get().payload == {"by": "cc"}
    assert list(AuditLog.objects.values_list("action", "result").order_by("id")) == [
        ("workflow_instance.send_event", "invalid_event_type"),
        ("workflow_instance.send_event", "ok"),
    ]
    harness.run_until_idle()
    assert status_of("w1") == "complete"


def test_overview_counts_by_version_and_status_with_the_active_pointer(console, harness):
    harness.create("h5-ver", id="a")
    services.workflow_version_activate(name="h5-ver", version=2)
    harness.create("h5-ver", id="b")
    harness.create("h5-ver", id="c")
    page = console.get(OVERVIEW).content.decode()
    assert "h5-ver — active version: v2" in page
    assert "Activate v1 (rollback)" in page
    section = page[page.index("h5-ver — active") :]
    v2_row = section[section.index(">v2<") : section.index("</tr>", section.index(">v2<"))]
    assert "<td>2</td>" in v2_row  # two complete instances on v2


def test_activate_version_asks_then_switches_and_audits(console):
    url = reverse("admin:workflows_activate_version", args=["h5-ver", 2])
    assert "Activate h5-ver v2?" in console.post(url).content.decode()
    assert not WorkflowDeployment.objects.filter(workflow_name="h5-ver", active_version=2).exists()
    response = console.post(url, {"confirm": "yes"}, follow=True)
    assert "Activated h5-ver v2" in response.content.decode()
    assert WorkflowDeployment.objects.get(workflow_name="h5-ver").active_version == 2
    row = AuditLog.objects.get(action="workflow.version_activate")
    assert row.actor == "user:charlie"


def test_activating_an_unknown_version_is_refused_with_a_message(console):
    url = reverse("admin:workflows_activate_version", args=["h5-ver", 9])
    page = console.post(url, {"confirm": "yes"}, follow=True).content.decode()
    assert "Activate refused: version_not_found" in page


def test_the_console_is_staff_only(client, alice, three):
    client.force_login(alice)
    assert client.get(CHANGELIST).status_code == 302


def refuse(request, **kwargs):
    return False


def test_console_actions_obey_workflows_policies(console, three, settings):
    settings.WORKFLOWS_POLICIES = {"manage": f"{__name__}.refuse"}
    response = bulk(console, "pause_selected", three.values())
    assert "0 instance(s) done, 2 not eligible skipped, 1 refused" in response.content.decode()
    assert status_of("w1") == "waiting"


def test_errored_and_version_missing_instances_say_so(console, harness):
    harness.create("h5-fail", id="f1")
    harness.create("h5-ver", id="gone")
    WorkflowInstance.objects.filter(instance_id="gone").update(version=9, status="waiting")
    failed = WorkflowInstance.objects.get(instance_id="f1")
    page = console.get(f"{CHANGELIST}{failed.pk}/change/").content.decode()
    assert "errored" in page and "NonRetryableError" in page and "no way" in page
    assert 'value="Restart …"' in page  # an errored instance can be restarted
    gone = WorkflowInstance.objects.get(instance_id="gone")
    assert "version_missing" in console.get(f"{CHANGELIST}{gone.pk}/change/").content.decode()
    assert "version_missing" in console.get(CHANGELIST).content.decode()
    overview = console.get(OVERVIEW).content.decode()
    assert "v9" in overview and "version_missing" in overview


def test_the_list_shows_current_step_last_error_started_and_duration(console, harness):
    # Seen: the list had status, ids and timestamps only; "where is it and what went wrong"
    # needed a click per row.
    harness.create("h5-approval", id="o2", params={"order": 2})
    harness.create("h5-fail", id="f1")
    harness.runtime.advance(timedelta(minutes=3, seconds=5))
    page = console.get(CHANGELIST).content.decode()
    for column in ("current_step", "last_error", "started", "duration"):
        assert f"column-{column}" in page
    assert "approval (waiting)" in page  # the waiting instance's newest step
    assert "NonRetryableError: no way" in page
    assert "3 min 05 s" in page  # still waiting: measured up to the engine's now


def test_the_timeline_shows_each_steps_duration(console, harness):
    harness.create("h5-approval", id="o3", params={"order": 3})
    harness.runtime.advance(timedelta(seconds=42))
    harness.send_event("h5-approval", "o3", "approve", {"by": "ann"})
    pk = WorkflowInstance.objects.get(instance_id="o3").pk
    page = console.get(f"{CHANGELIST}{pk}/change/").content.decode()
    assert "<th>duration</th>" in page
    assert "42.0 s" in page  # the wait for the approval event
