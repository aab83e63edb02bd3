"""Console tests: the sample workflows, a harness, and a staff client; browser tests get
Chromium from Debian (never downloaded) and skip, saying why, when it is missing."""

from datetime import UTC, datetime

import pytest

import tests.console.console_workflows  # noqa: F401 - registers the console workflows
import tests.graphs.helpers  # noqa: F401 - registers the graph actions the approval graph runs
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


@pytest.fixture
def approval_run(harness):
    """A graph run of the approval graph, run until its human node waits for a person."""
    from graphs import services
    from tests.graphs.test_api import approval_doc

    definition = services.definition_create(document=approval_doc())
    services.definition_publish(name=definition.name, version=definition.version)
    services.binding_create(name="approve", definition=definition.name)
    run = services.run_create(binding_name="approve", run_input={"items": [1, 2]})
    harness.run_until_idle()
    return run
