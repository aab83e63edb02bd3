"""The flagship example end to end through the HTTP API (harness clock; SQLite and PostgreSQL),
its webhook pointed at a real stand-in server (tests/graphs/standin.py): a webhook that fails
after its retries escalates to a person, who answers its branch; a 429 with Retry-After is
waited out inside the node; a call that times out once is made again with the same
Idempotency-Key."""

import json
import time

import pytest

from demo.graph_demo import demo_document, demo_upload
from tests.graphs.standin import answer

ALL = ("graphs:read", "graphs:write", "graphs:run", "graphs:approve")
MARKERS = 2  # the demo upload's out-of-range markers (ldl, hba1c); vitamin D is in range


@pytest.fixture
def api(operator_api):
    return operator_api(*ALL)


@pytest.fixture
def secrets(settings):
    settings.GRAPHS_HTTP_SECRETS = {"CLINIC_TOKEN": "t0ken"}


def start_flagship(api, url: str, *, request_timeout: str | None = None) -> str:
    document = demo_document(url)
    if request_timeout is not None:
        next(n for n in document["nodes"] if n["ref"] == "notify")["action"]["timeout"] = (
            request_timeout
        )
    created = api.post("/v1/graphs/definitions", document, format="json")
    assert created.status_code == 201, created.json()
    published = api.post("/v1/graphs/definitions/lab-out-of-range/versions/1/publish")
    assert published.status_code == 200, published.json()
    api.post(
        "/v1/graphs/bindings", {"name": "labs", "definition": "lab-out-of-range"}, format="json"
    )
    upload = demo_upload("dana")
    run = api.post(
        "/v1/graphs/bindings/labs/runs",
        {"input": {"upload_id": str(upload.pk)}},
        format="json",
        HTTP_IDEMPOTENCY_KEY="flagship",
    )
    assert run.status_code == 201, run.json()
    return run.json()["id"]


def detail(api, run_id) -> dict:
    return api.get(f"/v1/graphs/runs/{run_id}").json()


def tokens(api, run_id, node: str) -> list[dict]:
    return [t for t in detail(api, run_id)["tokens"] if t["node"] == node]


def test_a_webhook_failing_after_its_retries_escalates_to_a_person(api, harness, stand_in, secrets):
    clinic = stand_in(answer(500))
    run_id = start_flagship(api, clinic.url)
    harness.run_until_idle()
    for _ in range(6):  # the node's backoff: 30 s, 1, 2, 4, 8 min
        harness.advance("10 minutes")
    assert len(clinic.calls) == MARKERS * 6  # each marker: 1 attempt + 5 retries
    assert len(set(clinic.keys)) == MARKERS  # one key per marker, on every retry of it
    assert all(json.loads(c.body)["code"] in ("ldl", "hba1c") for c in clinic.calls)

    failed = tokens(api, run_id, "notify")
    assert [t["status"] for t in failed] == ["failed"] * MARKERS
    assert failed[0]["error"] == {
        "name": "ConnectionError",
        "message": "HTTP 500 from 127.0.0.1",
        "node": "notify",
        "attempts": 6,
    }
    people = tokens(api, run_id, "phone-clinic")
    assert [t["status"] for t in people] == ["executing"] * MARKERS
    assert detail(api, run_id)["status"] == "waiting"

    for person in people:
        sent = api.post(
            f"/v1/graphs/runs/{run_id}/events",
            {"type": "clinic_phoned", "payload": {"phoned": True}, "token": person["path_id"]},
            format="json",
        )
        assert sent.status_code == 200, sent.json()
    harness.run_until_idle()
    assert [t["status"] for t in tokens(api, run_id, "ack")] == ["executing"]
    api.post(
        f"/v1/graphs/runs/{run_id}/events",
        {"type": "clinician_ack", "payload": {"approved": True}},
        format="json",
    )
    harness.run_until_idle()
    final = detail(api, run_id)
    assert final["status"] == "complete" and final["output"]["outcome"] == "acknowledged"
    assert final["output"]["notifications"] == [{"phoned": True}] * MARKERS
    events = api.get(f"/v1/graphs/runs/{run_id}/events?page_size=200").json()["events"]
    assert sum(e["type"] == "node_failed" for e in events) == MARKERS


def test_a_429_with_retry_after_is_waited_out_inside_the_node(api, harness, stand_in, secrets):
    clinic = stand_in(answer(429, retry_after="2"), answer(200, {"ok": True}))
    run_id = start_flagship(api, clinic.url)
    started = time.monotonic()
    harness.run_until_idle()
    elapsed = time.monotonic() - started
    assert [t["status"] for t in tokens(api, run_id, "notify")] == ["completed"] * MARKERS
    assert len(clinic.calls) == MARKERS + 1  # the first marker's call came twice
    assert clinic.keys[0] == clinic.keys[1] != clinic.keys[2]
    assert clinic.calls[1].at - clinic.calls[0].at >= 2.0
    assert detail(api, run_id)["context"]["notifications"] == [{"ok": True}] * MARKERS
    print(  # figures for the record (pytest -s), not assertions
        f"\n429 + Retry-After: 2 -> the node completed {clinic.calls[1].at - clinic.calls[0].at:.2f}"
        f" s after its first call; both markers notified in {elapsed:.2f} s"
    )


def test_a_webhook_that_times_out_once_is_called_again_with_the_same_key(
    api, harness, stand_in, secrets
):
    clinic = stand_in(answer(200, {"late": True}, delay=1.5), answer(200, {"ok": True}))
    run_id = start_flagship(api, clinic.url, request_timeout="1 second")
    harness.run_until_idle()
    harness.advance("30 seconds")  # the node's first retry
    notified = tokens(api, run_id, "notify")
    assert [t["status"] for t in notified] == ["completed"] * MARKERS
    assert len(clinic.calls) == MARKERS + 1
    # The first marker's call timed out; the other branch went on meanwhile; its retry came
    # with the key the timed-out call carried.
    assert clinic.keys[0] == clinic.keys[2] != clinic.keys[1]
    assert detail(api, run_id)["context"]["notifications"] == [{"ok": True}] * MARKERS
    print(
        f"\ntimes out once, then succeeds: {len(clinic.calls)} calls for {MARKERS} markers, "
        f"keys {clinic.keys}"
    )
