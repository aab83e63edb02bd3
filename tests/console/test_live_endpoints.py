"""The live-refresh JSON endpoints: a stamp that changes when the page would, whether anything
is in flight, and {"code", "message"} errors (never a login redirect or an HTML page)."""

import pytest

from workflows.models import WorkflowInstance


def live(console, url):
    response = console.get(url)
    assert response.status_code == 200, response.content
    return response.json()


def instance_url(instance_id):
    pk = WorkflowInstance.objects.get(instance_id=instance_id).pk
    return f"/admin/workflows/workflowinstance/{pk}/live.json"


def test_the_instance_stamp_moves_as_the_run_advances_and_in_flight_ends_with_it(console, harness):
    harness.create("console-approval", id="a")
    harness.run_until_idle()
    first = live(console, instance_url("a"))
    assert first["in_flight"] is True and first["status"] == "waiting"
    assert live(console, instance_url("a"))["stamp"] == first["stamp"]  # nothing happened
    harness.advance("1 minute")
    second = live(console, instance_url("a"))
    assert second["stamp"] != first["stamp"]
    harness.send_event("console-approval", "a", "approved", {"by": "dr"})
    done = live(console, instance_url("a"))
    assert (done["status"], done["in_flight"], done["finished"]) == ("complete", False, True)


def test_the_instances_list_stamp_moves_on_a_new_instance_and_on_progress(console, harness):
    empty = live(console, "/admin/workflows/workflowinstance/live.json")
    assert empty["in_flight"] is False
    harness.create("console-approval", id="a")
    created = live(console, "/admin/workflows/workflowinstance/live.json")
    assert created["stamp"] != empty["stamp"] and created["in_flight"] is True
    harness.advance("1 minute")  # its sleep ends, it starts waiting for the event
    assert live(console, "/admin/workflows/workflowinstance/live.json")["stamp"] != created["stamp"]


def test_the_graph_run_stamp_moves_when_the_person_answers(console, harness, approval_run):
    url = f"/admin/graphs/graphrun/{approval_run.pk}/live.json"
    before = live(console, url)
    assert before["in_flight"] is True
    console.post(
        f"/admin/graphs/graphrun/{approval_run.pk}/decide/",
        {"event_type": "ack", "decision": "approve"},
    )
    harness.run_until_idle()
    after = live(console, url)
    assert after["stamp"] != before["stamp"] and after["in_flight"] is False


def test_the_graph_runs_list_polls_while_a_run_waits(console, approval_run):
    page = console.get("/admin/graphs/graphrun/").content.decode()
    assert 'data-live-url="/admin/graphs/graphrun/live.json"' in page
    assert 'data-live-in-flight="true"' in page
    assert live(console, "/admin/graphs/graphrun/live.json")["in_flight"] is True


def test_the_raw_events_stamp_moves_when_a_row_arrives(console):
    from tests.factories import RawEventFactory

    before = live(console, "/admin/ingest/rawevent/live.json")
    RawEventFactory()
    after = live(console, "/admin/ingest/rawevent/live.json")
    assert after["stamp"] != before["stamp"] and after["in_flight"] is True


@pytest.mark.parametrize(
    "url",
    [
        "/admin/workflows/workflowinstance/live.json",
        "/admin/workflows/workflowinstance/1/live.json",
        "/admin/graphs/graphrun/1/live.json",
        "/admin/graphs/graphrun/live.json",
        "/admin/ingest/rawevent/live.json",
    ],
)
def test_anonymous_callers_get_a_json_401(client, db, url):
    response = client.get(url)
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_required"


def test_non_staff_get_a_json_403(client, alice):
    client.force_login(alice)
    response = client.get("/admin/workflows/workflowinstance/live.json")
    assert (response.status_code, response.json()["code"]) == (403, "permission_denied")


def test_staff_without_view_permission_get_a_json_403(client, db):
    from tests.factories import UserFactory

    client.force_login(UserFactory(username="dora", is_staff=True))
    response = client.get("/admin/ingest/rawevent/live.json")
    assert (response.status_code, response.json()["code"]) == (403, "permission_denied")


def test_an_unknown_row_is_a_json_404_and_a_post_a_json_405(console):
    missing = console.get("/admin/workflows/workflowinstance/999999/live.json")
    assert (missing.status_code, missing.json()["code"]) == (404, "not_found")
    posted = console.post("/admin/workflows/workflowinstance/live.json")
    assert (posted.status_code, posted.json()["code"]) == (405, "method_not_allowed")
