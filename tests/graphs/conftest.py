"""Fixtures for graph tests: a harness with a controllable clock, postgres_only skips, a fake
network for the http action, and real stand-in servers for it (stand_in)."""

from datetime import UTC, datetime

import httpx
import pytest
from django.db import connection

import tests.graphs.helpers  # noqa: F401 - registers the test actions
from graphs import http_action
from tests.graphs.standin import StandIn
from workflows.testing import WorkflowHarness

START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def pytest_runtest_setup(item):
    if item.get_closest_marker("postgres_only") and connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (real runner processes)")


@pytest.fixture(autouse=True)
def _no_wake_tasks(settings):
    settings.WORKFLOWS_WAKE_TASKS = False


@pytest.fixture
def harness(db):
    with WorkflowHarness(start=START) as h:
        yield h


class FakeWeb:
    """Answers the http action: routes by (method, url) and records requests."""

    def __init__(self):
        self.requests: list[httpx.Request] = []
        self.routes: dict[tuple[str, str], object] = {}

    def on(self, method, url, answer):
        self.routes[(method, url)] = answer

    def handler(self, request):
        self.requests.append(request)
        answer = self.routes.get((request.method, str(request.url)), (200, {"ok": True}))
        if callable(answer):
            answer = answer(request)
        if isinstance(answer, httpx.Response):
            return answer
        status, body = answer
        return httpx.Response(status, json=body)


@pytest.fixture
def web(settings):
    fake = FakeWeb()
    http_action.set_transport(httpx.MockTransport(fake.handler))
    settings.GRAPHS_HTTP_ALLOWED_HOSTS = ["hooks.test:443"]
    yield fake
    http_action.set_transport(None)
    http_action.set_resolver(None)


@pytest.fixture
def stand_in(settings):
    """stand_in(*answers) → a running StandIn whose host the http action may reach."""
    opened = []

    def start(*script):
        server = StandIn(list(script)).__enter__()
        opened.append(server)
        settings.GRAPHS_HTTP_ALLOWED_HOSTS = [s.host for s in opened]
        return server

    yield start
    for server in opened:
        server.__exit__()
