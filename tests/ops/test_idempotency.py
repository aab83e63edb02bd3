"""Idempotency keys (ops.idempotency) through a tiny DRF view that "creates" one audit row per
real execution, so every test can count how many times the handler actually ran."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest
from django.conf import settings
from django.core.servers.basehttp import ThreadedWSGIServer
from django.test.testcases import LiveServerThread, _StaticFilesHandler
from django.urls import path
from django.utils import timezone
from rest_framework.response import Response
from rest_framework.views import APIView

from ops.errors import ApiError
from ops.idempotency import body_hash, idempotent, normalize_key
from ops.models import AuditLog, IdempotencyKey
from ops.services import api_key_create

IS_POSTGRES = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


class CreateThing(APIView):
    permission_classes = []  # anonymous calls share the "system" principal
    delay = 0.0

    @idempotent(required=True)
    def post(self, request):
        if request.data.get("fail"):
            AuditLog.objects.create(actor="test", action="thing.failed")
            raise ApiError(409, "thing_refused", "No.")
        if request.data.get("crash"):
            AuditLog.objects.create(actor="test", action="thing.crashed")
            raise RuntimeError("boom")
        time.sleep(self.delay)
        row = AuditLog.objects.create(actor="test", action="thing.create")
        return Response({"id": row.pk, "echo": request.data}, status=201)


class SlowCreateThing(CreateThing):
    delay = 0.3


class OptionalThing(APIView):
    permission_classes = []

    @idempotent(required=False)
    def post(self, request):
        row = AuditLog.objects.create(actor="test", action="thing.create")
        return Response({"id": row.pk})


urlpatterns = [
    path("things", CreateThing.as_view()),
    path("slow-things", SlowCreateThing.as_view()),
    path("optional", OptionalThing.as_view()),
]

pytestmark = [pytest.mark.urls(__name__)]


class _RoomyServer(ThreadedWSGIServer):
    # 50 clients connect at once; the default listen backlog (10) would reset some of them.
    request_queue_size = 128


class _RoomyLiveServerThread(LiveServerThread):
    server_class = _RoomyServer


@pytest.fixture
def roomy_live_server(transactional_db):
    """A live server URL that accepts 50+ simultaneous connections (PostgreSQL only: each
    request thread has its own connection; an in-memory SQLite database can't be shared)."""
    thread = _RoomyLiveServerThread("127.0.0.1", static_handler=_StaticFilesHandler)
    thread.daemon = True
    thread.start()
    thread.is_ready.wait()
    if thread.error:
        raise thread.error
    yield f"http://127.0.0.1:{thread.port}"
    thread.terminate()


def created() -> int:
    return AuditLog.objects.filter(action="thing.create").count()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("abc", "abc"), ('"abc"', "abc"), ("  k-1  ", "k-1"), ("x" * 255, "x" * 255)],
)
def test_keys_are_normalised(raw, expected):
    assert normalize_key(raw) == expected


@pytest.mark.parametrize("raw", ["", '""', "x" * 256, "has space", "é", "tab\tkey"])
def test_malformed_keys_are_rejected(raw):
    with pytest.raises(ApiError) as err:
        normalize_key(raw)
    assert err.value.status == 400


def test_body_hash_ignores_key_order_and_whitespace():
    assert body_hash({"a": 1, "b": [1, 2]}) == body_hash({"b": [1, 2], "a": 1})
    assert body_hash({"a": 1}) != body_hash({"a": 2})


@pytest.mark.django_db
def test_missing_key_is_400_idempotency_required_and_nothing_runs(api):
    response = api.post("/things", {"x": 1}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "idempotency_required"
    assert created() == 0


@pytest.mark.django_db
def test_malformed_key_is_400(api):
    response = api.post("/things", {"x": 1}, format="json", HTTP_IDEMPOTENCY_KEY="bad key")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"


@pytest.mark.django_db
def test_retry_with_equal_body_gets_the_stored_response_byte_for_byte(api):
    first = api.generic(
        "POST", "/things", '{"b": 2, "a": 1}', "application/json", HTTP_IDEMPOTENCY_KEY="k1"
    )
    again = api.generic(
        "POST", "/things", '{ "a" : 1,\n "b":2 }', "application/json", HTTP_IDEMPOTENCY_KEY='"k1"'
    )
    assert first.status_code == again.status_code == 201
    assert first.content == again.content
    assert again["Idempotent-Replayed"] == "true"
    assert created() == 1
    row = IdempotencyKey.objects.get()
    assert (row.key, row.endpoint, row.status_code) == ("k1", "POST /things", 201)
    assert row.expires_at - row.created_at == pytest.approx(
        timedelta(hours=24), abs=timedelta(seconds=5)
    )


@pytest.mark.django_db
def test_same_key_with_a_different_body_is_409_conflict(api):
    api.post("/things", {"a": 1}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    response = api.post("/things", {"a": 2}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert response.status_code == 409
    assert response.json()["code"] == "idempotency_conflict"
    assert created() == 1


@pytest.mark.django_db
def test_keys_are_scoped_per_endpoint_and_principal(operator_api):
    alice, bob = operator_api("x", name="alice"), operator_api("x", name="bob")
    alice.post("/things", {"a": 1}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    alice.post("/slow-things", {"a": 1}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    bob.post("/things", {"a": 1}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert created() == 3
    alice.post("/things", {"a": 1}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert created() == 3


@pytest.mark.django_db
def test_a_refused_request_stores_no_response_and_frees_the_key(api):
    response = api.post("/things", {"fail": True}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert response.status_code == 409
    assert response.json()["code"] == "thing_refused"
    assert not IdempotencyKey.objects.exists()
    # What the handler wrote before refusing (its audit row) is kept.
    assert AuditLog.objects.filter(action="thing.failed").count() == 1
    again = api.post("/things", {"fail": True}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert again.status_code == 409
    assert AuditLog.objects.filter(action="thing.failed").count() == 2


@pytest.mark.django_db
def test_an_unexpected_exception_rolls_everything_back(api):
    with pytest.raises(RuntimeError):
        api.post("/things", {"crash": True}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert not IdempotencyKey.objects.exists()
    assert not AuditLog.objects.filter(action="thing.crashed").exists()


@pytest.mark.django_db
def test_an_expired_key_runs_again(api):
    api.post("/things", {"a": 1}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    IdempotencyKey.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    response = api.post("/things", {"a": 1}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert response.status_code == 201
    assert "Idempotent-Replayed" not in response
    assert created() == 2


@pytest.mark.django_db
def test_optional_key_deduplicates_when_sent_and_not_otherwise(api):
    api.post("/optional", {}, format="json")
    api.post("/optional", {}, format="json")
    assert created() == 2
    api.post("/optional", {}, format="json", HTTP_IDEMPOTENCY_KEY="k")
    api.post("/optional", {}, format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert created() == 3


@pytest.mark.postgres_only
@pytest.mark.skipif(not IS_POSTGRES, reason="needs PostgreSQL: real threads on a live server")
def test_fifty_concurrent_requests_with_one_key_run_the_handler_once(roomy_live_server):
    api_key_create(name="load", scopes=["x"])
    barrier = threading.Barrier(50)

    def call(_):
        with httpx.Client(base_url=roomy_live_server, timeout=60) as client:
            barrier.wait()
            return client.post("/slow-things", json={"a": 1}, headers={"Idempotency-Key": "one"})

    with ThreadPoolExecutor(max_workers=50) as pool:
        responses = list(pool.map(call, range(50)))

    assert {r.status_code for r in responses} == {201}
    assert len({r.content for r in responses}) == 1
    assert sum(r.headers.get("Idempotent-Replayed") == "true" for r in responses) == 49
    assert created() == 1
    assert IdempotencyKey.objects.count() == 1
