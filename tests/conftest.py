"""Shared fixtures: named users, API clients with credentials, and a fake Terra at the HTTP
boundary (no test ever reaches the simulator or the network unless it asks to)."""

import json
from pathlib import Path

import httpx
import pytest
from django.db import connection
from rest_framework.test import APIClient

from ingest.terra import client as terra_client
from ops.services import api_key_create, user_token_create
from tests.factories import UserFactory

FIXTURES = Path(__file__).parent / "fixtures"


def pytest_runtest_setup(item):
    # Slow real-process tests run once, in the PostgreSQL pass of .ci/run.
    if item.get_closest_marker("postgres_only") and connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (real processes, SKIP LOCKED), or runs once in that pass")


def load_fixture(name: str) -> dict:
    """A Terra sample payload from tests/fixtures/terra (copied from shared/fixtures/terra)."""
    return json.loads((FIXTURES / "terra" / name).read_text())


class FakeTerra:
    """Answers Terra API calls from registered handlers and records every request."""

    def __init__(self):
        self.requests: list[httpx.Request] = []
        self.routes: dict[tuple[str, str], object] = {}

    def on(self, method: str, path: str, response):
        """response: an httpx.Response, a (status, json) tuple, an exception, or a callable(request)."""
        self.routes[(method.upper(), path)] = response

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.routes.get((request.method, request.url.path))
        if answer is None:
            return httpx.Response(200, json={"status": "success"})
        if isinstance(answer, Exception):
            raise answer
        if callable(answer) and not isinstance(answer, httpx.Response):
            answer = answer(request)
        if isinstance(answer, tuple):
            status, body = answer
            return httpx.Response(status, json=body)
        return answer

    def calls(self, method: str, path: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == method.upper() and r.url.path == path]


@pytest.fixture(autouse=True)
def terra():
    fake = FakeTerra()
    terra_client.set_transport(httpx.MockTransport(fake.handler))
    yield fake
    terra_client.set_transport(None)


@pytest.fixture(autouse=True)
def _media_root(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.TERRA_WEBHOOK_SECRETS = ["test-secret"]
    # The webhook's database work runs inline: the test's transaction is on this thread.
    settings.TERRA_WEBHOOK_DB_DEADLINE_SECONDS = 0
    # No due-poller thread in this process (django-q2's sync mode sends post_spawn here).
    settings.INGEST_POLL_SECONDS = 0
    # No heartbeat threads in this process either; the liveness tests turn them on.
    settings.HEARTBEAT_SECONDS = 0
    # No request limits and /v1/me reconciles every time, unless a test says otherwise
    # (tests/ops/test_limits.py): suites make many requests from one "client".
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"operator": None, "user": None, "anon": None},
    }
    settings.ME_RECONCILE_SECONDS = 0
    # Calls to (the fake) Terra are not paced unless a test says so (tests/ingest/test_terra_client.py).
    settings.TERRA_API_RATE_PER_SECOND = None
    settings.GRAPHS_HTTP_RATE_PER_HOST = None


@pytest.fixture
def registries():
    """What a test registers (ingest.registry's user tables, ops.userdata's sources, identifier
    providers, stoppers and mentions) is unregistered after it."""
    from ingest import registry
    from ops import userdata

    saved = (
        dict(registry._user_tables),
        list(userdata._sources),
        list(userdata._identifiers),
        dict(userdata._stoppers),
        list(userdata._mentions),
    )
    yield
    registry._user_tables.clear()
    registry._user_tables.update(saved[0])
    userdata._sources[:] = saved[1]
    userdata._identifiers[:] = saved[2]
    userdata._stoppers.clear()
    userdata._stoppers.update(saved[3])
    userdata._mentions[:] = saved[4]


@pytest.fixture
def alice(db):
    return UserFactory(username="alice")


@pytest.fixture
def bob(db):
    return UserFactory(username="bob")


@pytest.fixture
def staff(db):
    return UserFactory(username="charlie", is_staff=True, is_superuser=True)


@pytest.fixture
def api():
    return APIClient()


@pytest.fixture
def user_api(alice):
    """An API client authenticated as alice with a bearer token."""
    _, raw = user_token_create(user=alice)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def operator_api(db):
    """operator_api(*scopes) → an API client sending X-Admin-Key with those scopes."""

    def make(*scopes: str, name: str | None = None) -> APIClient:
        _, raw = api_key_create(
            name=name or f"key-{'-'.join(scopes) or 'none'}", scopes=list(scopes)
        )
        client = APIClient()
        client.credentials(HTTP_X_ADMIN_KEY=raw)
        return client

    return make


def sign(body: bytes, *, secret: str = "test-secret", timestamp: int | None = None) -> str:
    """A Terra-Signature header value for `body`: t=<unix>,v1=<hex hmac-sha256 of "{t}.{body}">."""
    import hashlib
    import hmac
    import time

    t = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={digest}"


@pytest.fixture
def deliver(client):
    """deliver(payload) posts a signed Terra webhook to /webhook/terra and returns the response.
    payload: a dict (serialized here) or raw bytes; path/secret/timestamp/headers overridable."""

    def post(payload, *, path="/webhook/terra", secret="test-secret", timestamp=None, headers=None):
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        extra = {"HTTP_TERRA_SIGNATURE": sign(body, secret=secret, timestamp=timestamp)}
        extra.update(headers or {})
        return client.generic("POST", path, body, content_type="application/json", **extra)

    return post
