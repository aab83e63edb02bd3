"""Fixtures for the demo's tests: the ingest spine run inline (post, sync_queue) and the graph
tests' harness and fake clinic webhook, shared with the apps the demo drives."""

import pytest

from tests.graphs.conftest import harness, web  # noqa: F401 - fixtures
from tests.ingest.conftest import post, sync_queue  # noqa: F401 - fixtures


@pytest.fixture(autouse=True)
def _no_wake_tasks(settings):
    # The harness drives instances; no django-q2 wake task is queued for them.
    settings.WORKFLOWS_WAKE_TASKS = False
