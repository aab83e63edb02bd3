"""Console tests: the sample workflows, a harness, and a staff client; browser tests get
Chromium from Debian (never downloaded) and skip, saying why, when it is missing."""

from datetime import UTC, datetime

import pytest

import tests.console.console_workflows  # noqa: F401 - registers the console workflows
from workflows.testing import WorkflowHarness

START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _no_wake_tasks(settings):
    settings.WORKFLOWS_WAKE_TASKS = False


@pytest.fixture
def harness(db):
    with WorkflowHarness(start=START) as h:
        yield h


@pytest.fixture
def console(client, staff):
    client.force_login(staff)
    return client
