"""/v1/workflows: listing workflows and instances, creating (single and batch), reading one
instance with its current step, and its history with separate cursors."""

import pytest

from tests.workflows.test_http_support import ALL_SCOPES, READ, create, instance_url, new_key
from workflows.models import WorkflowDeployment, WorkflowInstance


@pytest.fixture
def ops_api(operator_api):
    return operator_api(*ALL_SCOPES, name="oncall")


def test_workflows_list_shows_versions_and_the_active_pointer(ops_api):
    response = ops_api.get("/v1/workflows")
    assert response.status_code == 200
    by_name = {w["name"]: w for w in response.json()["workflows"]}
    assert by_name["h5-ver"] == {
        "name": "h5-ver",
        "versions": [1, 2],
        "active_version": 1,
        "schedules": [],
    }
    assert by_name["h5-approval"]["versions"] == [1]


def test_create_answers_201_with_id_and_details(ops_api):
    response = create(ops_api, id="order-1", params={"order": 1})
    assert response.status_code == 201
    assert response.json() == {"id": "order-1", "details": {"status": "active"}}
    row = WorkflowInstance.objects.get(instance_id="order-1")
    assert (row.workflow_name, row.version, row.params) == ("h5-approval", 1, {"order": 1})


def test_create_without_id_generates_one(ops_api):
    response = create(ops_api)
    assert response.status_code == 201
    assert WorkflowInstance.objects.filter(instance_id=response.json()["id"]).exists()


@pytest.mark.parametrize(
    ("name", "body", "status", "code"),
    [
        ("nope", {"id": "a"}, 404, "workflow_not_found"),
        ("h5-approval", {"id": "bad id!"}, 400, "invalid_instance_id"),
        ("h5-approval", {"id": "x" * 101}, 400, "invalid_instance_id"),
        ("h5-approval", {"id": 5}, 400, "invalid_request"),
        ("h5-approval", [1, 2], 400, "invalid_request"),
    ],
)
def test_create_refusals(ops_api, name, body, status, code):
    response = ops_api.post(
        f"/v1/workflows/{name}/instances", body, format="json", HTTP_IDEMPOTENCY_KEY=new_key()
    )
    assert (response.status_code, response.json()["code"]) == (status, code)


def test_create_with_an_existing_id_is_409(ops_api):
    create(ops_api, id="dup")
    response = create(ops_api, id="dup")
    assert (response.status_code, response.json()["code"]) == (409, "instance_id_already_exists")


def test_create_without_an_active_version_is_409_no_active_deployment(ops_api):
    WorkflowDeployment.objects.create(
        workflow_name="h5-approval", active_version=9, updated_at="2026-01-01T00:00:00Z"
    )
    response = create(ops_api, id="a")
    assert (response.status_code, response.json()["code"]) == (409, "no_active_deployment")


def test_create_with_a_malformed_body_is_400_invalid_json(ops_api):
    response = ops_api.generic(
        "POST",
        "/v1/workflows/h5-approval/instances",
        "{nope",
        "application/json",
        HTTP_IDEMPOTENCY_KEY="k",
    )
    assert (response.status_code, response.json()["code"]) == (400, "invalid_json")


def test_batch_creates_new_ids_and_skips_existing_ones(ops_api):
    create(ops_api, id="b1")
    response = ops_api.post(
        "/v1/workflows/h5-approval/instances/batch",
        {"instances": [{"id": "b1"}, {"id": "b2", "params": {"order": 2}}, {"id": "b3"}]},
        format="json",
        HTTP_IDEMPOTENCY_KEY=new_key(),
    )
    assert response.status_code == 201
    assert [i["id"] for i in response.json()["instances"]] == ["b2", "b3"]
    assert WorkflowInstance.objects.get(instance_id="b2").params == {"order": 2}


@pytest.mark.parametrize(
    ("body", "headers", "code"),
    [
        ({"instances": [{"id": f"i{n}"} for n in range(101)]}, True, "invalid_request"),
        ({"instances": []}, True, "invalid_request"),
        ({"instances": [{"id": "ok"}]}, False, "idempotency_required"),
        ({"instances": [{"id": "bad id"}]}, True, "invalid_instance_id"),
    ],
)
def test_batch_refusals(ops_api, body, headers, code):
    extra = {"HTTP_IDEMPOTENCY_KEY": new_key()} if headers else {}
    response = ops_api.post(
        "/v1/workflows/h5-approval/instances/batch", body, format="json", **extra
    )
    assert (response.status_code, response.json()["code"]) == (400, code)
    assert not WorkflowInstance.objects.exists()


def test_instances_list_filters_by_status_and_pages_with_a_cursor(ops_api, harness):
    for n in range(5):
        create(ops_api, id=f"o{n}")
    create(ops_api, "h5-fail", id="f1")
    harness.run_until_idle()

    first = ops_api.get("/v1/workflows/h5-approval/instances?page_size=2").json()
    assert [i["id"] for i in first["instances"]] == ["o4", "o3"]
    assert first["has_next_page"] is True
    second = ops_api.get(
        f"/v1/workflows/h5-approval/instances?page_size=2&cursor={first['cursor']}"
    )
    third = ops_api.get(
        f"/v1/workflows/h5-approval/instances?page_size=2&cursor={second.json()['cursor']}"
    ).json()
    assert [i["id"] for i in second.json()["instances"]] == ["o2", "o1"]
    assert (third["instances"][0]["id"], third["has_next_page"], third["cursor"]) == (
        "o0",
        False,
        None,
    )

    errored = ops_api.get("/v1/workflows/h5-fail/instances?status=errored").json()["instances"]
    assert errored == [
        {
            "id": "f1",
            "details": {
                "status": "errored",
                "error": {"name": "NonRetryableError", "message": "no way"},
            },
        }
    ]
    assert ops_api.get("/v1/workflows/h5-approval/instances?status=complete").json() == {
        "instances": [],
        "cursor": None,
        "has_next_page": False,
    }


@pytest.mark.parametrize(
    "query", ["cursor=%%%", "cursor=bm9wZQ", "page_size=0", "page_size=201", "status=sleepy"]
)
def test_instances_list_rejects_bad_query_parameters(ops_api, query):
    response = ops_api.get(f"/v1/workflows/h5-approval/instances?{query}")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")


def test_get_instance_shows_meta_and_the_current_step(ops_api, harness):
    create(ops_api, id="o1", params={"order": 7})
    harness.run_until_idle()
    body = ops_api.get(instance_url("o1")).json()
    assert body["id"] == "o1"
    assert body["details"] == {"status": "waiting"}
    meta = body["meta"]
    assert {k: meta[k] for k in ("workflow_name", "version", "run_number", "params")} == {
        "workflow_name": "h5-approval",
        "version": 1,
        "run_number": 1,
        "params": {"order": 7},
    }
    assert meta["created_at"] and meta["started_at"] and meta["completed_at"] is None
    step = meta["current_step"]
    assert (step["name"], step["type"], step["status"], step["wait_event_type"]) == (
        "approval",
        "wait_for_event",
        "waiting",
        "approve",
    )
    assert step["wake_at"] is not None


def test_get_a_complete_instance_shows_its_output(ops_api, harness):
    create(ops_api, id="o1", params={"order": 7})
    harness.run_until_idle()
    harness.send_event("h5-approval", "o1", "approve", {"by": "ann"})
    body = ops_api.get(instance_url("o1")).json()
    assert body["details"] == {"status": "complete", "output": {"order": 7, "approved_by": "ann"}}
    assert "current_step" not in body["meta"]


def test_get_an_unknown_instance_is_404(ops_api):
    response = ops_api.get(instance_url("ghost"))
    assert (response.status_code, response.json()["code"]) == (404, "instance_not_found")


def test_history_has_steps_events_and_logs_with_their_own_cursors(ops_api, harness):
    create(ops_api, id="o1", params={"order": 1})
    harness.run_until_idle()
    for n in range(3):
        harness.send_event("h5-approval", "o1", "noise", {"n": n}, run=False)
    url = instance_url("o1", "/history")

    body = ops_api.get(f"{url}?page_size=1").json()
    assert body["run_number"] == 1
    assert [s["name"] for s in body["steps"]] == ["prepare"]
    assert body["steps"][0]["result"] == {"order": 1}
    assert body["steps_has_next_page"] is True
    assert body["events"][0]["payload"] == {"n": 0}
    assert body["events_has_next_page"] is True
    assert "logs" not in body

    more = ops_api.get(f"{url}?page_size=1&steps_cursor={body['steps_cursor']}").json()
    assert [s["name"] for s in more["steps"]] == ["approval"]
    assert more["events"][0]["payload"] == {"n": 0}  # events cursor not sent: first page again

    desc = ops_api.get(f"{url}?order=desc&page_size=10").json()
    assert [e["payload"]["n"] for e in desc["events"]] == [2, 1, 0]

    logs = ops_api.get(f"{url}?include_logs=true&log_category=workflow").json()
    assert [line["message"] for line in logs["logs"]] == ["waiting for approval"]
    assert logs["logs"][0]["data"] == {"order": 1}
    assert logs["logs_has_next_page"] is False
    system = ops_api.get(f"{url}?include_logs=true&log_category=system").json()["logs"]
    assert all(line["category"] == "system" for line in system)


def test_history_of_an_earlier_run_after_restart(ops_api, harness):
    create(ops_api, id="o1")
    harness.run_until_idle()
    harness.restart("h5-approval", "o1")
    url = instance_url("o1", "/history")
    assert ops_api.get(url).json()["run_number"] == 2
    assert [s["name"] for s in ops_api.get(f"{url}?run_number=1").json()["steps"]] == [
        "prepare",
        "approval",
    ]


def test_history_of_an_unknown_instance_is_404(operator_api):
    response = operator_api(READ).get(instance_url("ghost", "/history"))
    assert (response.status_code, response.json()["code"]) == (404, "instance_not_found")


def test_listing_instances_of_an_unknown_workflow_is_404(ops_api):
    response = ops_api.get("/v1/workflows/no-such-flow/instances")
    assert response.status_code == 404
    assert response.json()["code"] == "workflow_not_found"
