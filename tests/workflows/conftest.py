"""Fixtures for the engine's tests: the sample workflows and a harness."""

from datetime import UTC, datetime

import pytest

import tests.workflows.composition_workflows  # noqa: F401 - registers the composition workflows
import tests.workflows.sample_workflows  # noqa: F401 - registers the sample workflows
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
def fleet():
    """Registers tests/workflows/fleet_workflows.py (capped workflows) for one test only."""
    import importlib

    from tests.workflows import fleet_workflows
    from workflows.authoring import registry

    importlib.reload(fleet_workflows)
    yield fleet_workflows
    for name in fleet_workflows.NAMES:
        for version in registry.versions(name):
            registry.unregister(name, version)


@pytest.fixture
def cron_fleet():
    """Registers tests/workflows/cron_workflows.py (cron schedules) for one test only."""
    import importlib

    from tests.workflows import cron_workflows
    from workflows import triggers
    from workflows.authoring import registry

    importlib.reload(cron_workflows)
    triggers.gate.reset()
    yield cron_workflows
    for name in cron_workflows.NAMES:
        for version in registry.versions(name):
            registry.unregister(name, version)
    triggers.gate.reset()
