"""/v1/graphs end to end through the API (harness clock; both databases): drafts, publish with
validation errors, bindings and pins, runs with Idempotency-Key, events, human approval."""

import pytest

from graphs.models import GraphToken
from ops.models import AuditLog
from tests.graphs.helpers import doc, node

ALL = ("graphs:read", "graphs:write", "graphs:run", "graphs:approve")


@pytest.fixture
def api_all(operator_api):
    return operator_api(*ALL)


def approval_doc():
    return doc(
        [
            node(
                "load", input_mapping={"items": "/input/items"}, output_mapping={"/items": "/items"}
            ),
            node(
                "work",
                input_mapping={"item": "/branch/item"},
                output_mapping={"/r": "/item"},
                retries={"limit": 0},
            ),
            node(
                "ack",
                "human",
                action={"event_type": "ack", "timeout": "48 hours"},
                output_mapping={"/ack": ""},
            ),
            node("done", "set", action={"values": {"/result": {"value": "approved"}}}),
            node("escalate", "set", action={"values": {"/result": {"value": "escalated"}}}),
        ],
        [
            {"ref": "each", "from": "load", "to": "work", "foreach": {"collection": "/items"}},
            {
                "from": "work",
                "to": "ack",
                "synchronization": {
                    "fan_out": "each",
                    "strategy": "all",
                    "merge": {"source": "/r", "target": "/all", "strategy": "append"},
                },
            },
            {
                "from": "ack",
                "to": "done",
                "priority": 1,
                "condition": {
                    "op": "==",
                    "left": {"path": "/ack/approved"},
                    "right": {"value": True},
                },
            },
            {"from": "ack", "to": "escalate", "priority": 2},
        ],
        name="approval",
        input_schema={
            "type": "object",
            "required": ["items"],
            "properties": {"items": {"type": "array"}},
        },
    )


def publish(api, document):
    created = api.post("/v1/graphs/definitions", document, format="json")
    assert created.status_code == 201, created.json()
    version = created.json()["version"]
    published = api.post(f"/v1/graphs/definitions/{document['name']}/versions/{version}/publish")
    assert published.status_code == 200, published.json()
    return version


def start(api, binding, run_input, key="k1"):
    return api.post(
        f"/v1/graphs/bindings/{binding}/runs",
        {"input": run_input},
        format="json",
        HTTP_IDEMPOTENCY_KEY=key,
    )


def test_definition_lifecycle_draft_edit_publish_then_immutable(api_all):
    document = approval_doc()
    created = api_all.post("/v1/graphs/definitions", document, format="json")
    assert created.status_code == 201
    assert created.json()["version"] == 1 and created.json()["status"] == "draft"
    document["description"] = "edited"
    edited = api_all.put("/v1/graphs/definitions/approval/versions/1", document, format="json")
    assert edited.status_code == 200 and edited.json()["description"] == "edited"
    assert api_all.post("/v1/graphs/definitions/approval/versions/1/publish").status_code == 200
    again = api_all.put("/v1/graphs/definitions/approval/versions/1", document, format="json")
    assert again.status_code == 409 and again.json()["code"] == "definition_published"
    second = api_all.post("/v1/graphs/definitions", document, format="json")
    assert second.json()["version"] == 2
    listed = api_all.get("/v1/graphs/definitions?name=approval").json()
    assert [d["version"] for d in listed["definitions"]] == [2, 1]
    assert listed["cursor"] is None and listed["has_next_page"] is False
    got = api_all.get("/v1/graphs/definitions/approval/versions/1").json()
    assert got["status"] == "published" and len(got["checksum"]) == 64


def test_publish_refuses_an_invalid_graph_naming_the_ref(api_all):
    document = approval_doc()
    document["transitions"][0]["to"] = "nowhere"
    api_all.post("/v1/graphs/definitions", document, format="json")
    answer = api_all.post("/v1/graphs/definitions/approval/versions/1/publish")
    assert answer.status_code == 400
    assert answer.json()["code"] == "invalid_graph" and answer.json()["ref"] == "each"
    assert "nowhere" in answer.json()["message"]


def test_bad_bodies_are_400_not_500(api_all):
    assert api_all.post("/v1/graphs/definitions", [1, 2], format="json").status_code == 400
    assert (
        api_all.post("/v1/graphs/definitions", {"name": "bad name"}, format="json").status_code
        == 400
    )
    assert api_all.get("/v1/graphs/definitions/x/versions/9").status_code == 404
    assert api_all.post("/v1/graphs/bindings", {"name": "b"}, format="json").status_code == 400
    assert api_all.get("/v1/graphs/runs/nope").status_code == 404
    assert api_all.get("/v1/graphs/runs?cursor=@@").status_code == 400


def test_run_through_the_api_from_input_to_approval(api_all, harness):
    publish(api_all, approval_doc())
    bound = api_all.post(
        "/v1/graphs/bindings", {"name": "approve", "definition": "approval"}, format="json"
    )
    assert bound.status_code == 201 and bound.json()["pinned_version"] is None

    missing_key = api_all.post(
        "/v1/graphs/bindings/approve/runs", {"input": {"items": []}}, format="json"
    )
    assert missing_key.status_code == 400 and missing_key.json()["code"] == "idempotency_required"
    invalid = start(api_all, "approve", {"items": "no"}, key="bad")
    assert invalid.status_code == 400 and invalid.json()["code"] == "invalid_input"
    assert invalid.json()["errors"][0]["path"] == "/items"

    created = start(api_all, "approve", {"items": [1, 2]})
    assert created.status_code == 201
    run_id = created.json()["id"]
    assert start(api_all, "approve", {"items": [1, 2]}).json()["id"] == run_id  # replayed
    harness.run_until_idle()

    detail = api_all.get(f"/v1/graphs/runs/{run_id}").json()
    assert detail["status"] == "waiting" and detail["version"] == 1
    assert detail["context"]["all"] == [1, 2]
    assert {t["path_id"]: t["status"] for t in detail["tokens"]}["1"] == "executing"

    sent = api_all.post(
        f"/v1/graphs/runs/{run_id}/events",
        {"type": "ack", "payload": {"approved": True}},
        format="json",
    )
    assert sent.status_code == 200
    harness.run_until_idle()
    detail = api_all.get(f"/v1/graphs/runs/{run_id}").json()
    assert detail["status"] == "complete" and detail["output"]["result"] == "approved"
    assert GraphToken.objects.get(run__run_id=run_id, path_id="2").node_ref == "done"

    events = api_all.get(f"/v1/graphs/runs/{run_id}/events?page_size=5").json()
    assert [e["sequence_number"] for e in events["events"]] == [1, 2, 3, 4, 5]
    rest = api_all.get(
        f"/v1/graphs/runs/{run_id}/events?page_size=200&cursor={events['cursor']}"
    ).json()
    assert (
        rest["events"][0]["sequence_number"] == 6 and rest["events"][-1]["type"] == "run_completed"
    )
    runs = api_all.get("/v1/graphs/runs?binding=approve").json()
    assert [r["id"] for r in runs["runs"]] == [run_id]
    assert AuditLog.objects.filter(action="graph_run.send_event").count() == 1


def test_pin_is_audited_and_new_runs_use_the_pinned_version(api_all, harness):
    publish(api_all, approval_doc())
    publish(api_all, approval_doc())
    api_all.post(
        "/v1/graphs/bindings", {"name": "approve", "definition": "approval"}, format="json"
    )
    assert start(api_all, "approve", {"items": []}, key="a").json()["version"] == 2
    pinned = api_all.post("/v1/graphs/bindings/approve/pin", {"version": 1}, format="json")
    assert pinned.status_code == 200 and pinned.json()["pinned_version"] == 1
    assert start(api_all, "approve", {"items": []}, key="b").json()["version"] == 1
    row = AuditLog.objects.get(action="graph_binding.pin")
    assert row.metadata == {"from": None, "to": 1}
    assert (
        api_all.post("/v1/graphs/bindings/approve/pin", {"version": 7}, format="json").status_code
        == 404
    )


def test_scopes(operator_api):
    reader = operator_api("graphs:read")
    assert reader.get("/v1/graphs/definitions").status_code == 200
    assert reader.post("/v1/graphs/definitions", approval_doc(), format="json").status_code == 403
    assert (
        operator_api("graphs:write")
        .post("/v1/graphs/bindings/x/runs", {}, format="json", HTTP_IDEMPOTENCY_KEY="k")
        .status_code
        == 403
    )
    from rest_framework.test import APIClient

    assert APIClient().get("/v1/graphs/runs").status_code == 401


def test_an_event_naming_a_token_answers_that_branch_and_a_wrong_token_is_409(api_all, harness):
    document = approval_doc()
    document["nodes"][1] = node(
        "work",
        "human",
        action={"event_type": "check"},
        output_mapping={"/r": "/ok"},
    )
    publish(api_all, document)
    api_all.post("/v1/graphs/bindings", {"name": "b", "definition": "approval"}, format="json")
    run_id = start(api_all, "b", {"items": [1, 2]}).json()["id"]
    harness.run_until_idle()
    path = f"/v1/graphs/runs/{run_id}/events"
    wrong = api_all.post(path, {"type": "check", "token": "0.7.0"}, format="json")
    assert wrong.status_code == 409 and wrong.json()["code"] == "no_waiting_human"
    sent = api_all.post(
        path, {"type": "check", "payload": {"ok": "second"}, "token": "0.1.0"}, format="json"
    )
    assert sent.status_code == 200
    harness.run_until_idle()
    tokens = {t["path_id"]: t for t in api_all.get(f"/v1/graphs/runs/{run_id}").json()["tokens"]}
    assert (
        tokens["0.1.0"]["output"] == {"ok": "second"} and tokens["0.0.0"]["status"] == "executing"
    )
    row = AuditLog.objects.get(action="graph_run.send_event")
    assert row.metadata == {"type": "check", "token": "0.1.0", "node": "work", "decision": "answer"}
