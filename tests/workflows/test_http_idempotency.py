"""Idempotency-Key on instance creation: required, replayed byte for byte, conflicts, and 50
concurrent requests with one key creating exactly one instance (PostgreSQL, live server)."""

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from ops.models import IdempotencyKey
from ops.services import api_key_create
from tests.ops.test_idempotency import IS_POSTGRES, roomy_live_server  # noqa: F401 - fixture
from tests.workflows.test_http_support import CREATE, create
from workflows.models import WorkflowInstance


@pytest.fixture
def creator(operator_api):
    return operator_api(CREATE, name="creator")


def test_create_without_a_key_is_400_idempotency_required(creator):
    response = creator.post("/v1/workflows/h5-approval/instances", {"id": "o1"}, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "idempotency_required")
    assert not WorkflowInstance.objects.exists()


def test_a_retry_with_an_equal_body_gets_the_same_bytes_and_no_new_instance(creator):
    first = creator.generic(
        "POST",
        "/v1/workflows/h5-approval/instances",
        '{"params": {"b": 1, "a": 2}}',
        "application/json",
        HTTP_IDEMPOTENCY_KEY="k1",
    )
    again = creator.generic(
        "POST",
        "/v1/workflows/h5-approval/instances",
        '{ "params" : { "a": 2, "b": 1 } }',
        "application/json",
        HTTP_IDEMPOTENCY_KEY='"k1"',
    )
    assert first.status_code == again.status_code == 201
    assert first.content == again.content
    assert WorkflowInstance.objects.count() == 1


def test_one_and_one_point_zero_are_the_same_request(creator):
    bodies = ['{"params": {"a": 1, "b": [10, 2.50]}}', '{"params": {"b": [1e1, 2.5], "a": 1.0}}']
    first, again = (
        creator.generic(
            "POST",
            "/v1/workflows/h5-approval/instances",
            body,
            "application/json",
            HTTP_IDEMPOTENCY_KEY="k-num",
        )
        for body in bodies
    )
    assert first.status_code == again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert WorkflowInstance.objects.count() == 1


def test_the_same_key_with_another_body_is_409_idempotency_conflict(creator):
    create(creator, id="o1", key="k1")
    response = create(creator, id="o2", key="k1")
    assert (response.status_code, response.json()["code"]) == (409, "idempotency_conflict")
    assert list(WorkflowInstance.objects.values_list("instance_id", flat=True)) == ["o1"]


def test_the_same_key_on_batch_is_a_different_endpoint(creator):
    create(creator, id="o1", key="k1")
    response = creator.post(
        "/v1/workflows/h5-approval/instances/batch",
        {"instances": [{"id": "o2"}]},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k1",
    )
    assert response.status_code == 201
    assert WorkflowInstance.objects.count() == 2


def test_a_refused_create_can_be_retried_with_the_same_key(creator):
    create(creator, id="o1", key="first")
    assert create(creator, id="o1", key="k2").status_code == 409  # id taken: nothing stored
    assert not IdempotencyKey.objects.filter(key="k2").exists()
    assert create(creator, id="o2", key="k2").status_code == 201


def test_a_batch_retry_replays_the_created_list(creator):
    body = {"instances": [{"id": "a"}, {"id": "b"}]}
    url = "/v1/workflows/h5-approval/instances/batch"
    first = creator.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="b1")
    again = creator.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="b1")
    assert first.content == again.content
    assert [i["id"] for i in again.json()["instances"]] == ["a", "b"]


@pytest.mark.postgres_only
@pytest.mark.skipif(not IS_POSTGRES, reason="needs PostgreSQL: real threads on a live server")
def test_fifty_concurrent_creates_with_one_key_make_exactly_one_instance(roomy_live_server):  # noqa: F811
    _, raw = api_key_create(name="burst", scopes=[CREATE])
    barrier = threading.Barrier(50)

    def call(_):
        with httpx.Client(base_url=roomy_live_server, timeout=60) as client:
            barrier.wait()
            return client.post(
                "/v1/workflows/h5-approval/instances",
                json={"params": {"order": 1}},  # no id: a second execution would be visible
                headers={"X-Admin-Key": raw, "Idempotency-Key": "burst-1"},
            )

    with ThreadPoolExecutor(max_workers=50) as pool:
        responses = list(pool.map(call, range(50)))

    assert [r.status_code for r in responses] == [201] * 50
    assert len({r.content for r in responses}) == 1
    assert WorkflowInstance.objects.count() == 1
    assert WorkflowInstance.objects.get().instance_id == responses[0].json()["id"]
