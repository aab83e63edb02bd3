"""Console tests: the sample workflows, a harness, and a staff client; browser tests get
Chromium from Debian (never downloaded) and skip, saying why, when it is missing."""

import os
from datetime import UTC, datetime

import pytest

import tests.console.console_workflows  # noqa: F401 - registers the console workflows
import tests.graphs.helpers  # noqa: F401 - registers the graph actions the approval graph runs
from tests.console.browser import CHROMIUM, HEIGHT, WIDTH, why_no_browser
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


@pytest.fixture(scope="module")
def browser(django_db_setup):
    """One Chromium per test module. Playwright's sync API keeps an event loop set on this
    thread while it runs, which Django takes for async code: the ORM calls the tests make
    between browser calls are synchronous, so the check is lifted for this module only."""
    reason = why_no_browser()
    if reason:
        pytest.skip(f"browser tests skipped: {reason}")
    from playwright.sync_api import sync_playwright

    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as p:
            launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            yield launched
            launched.close()
    finally:
        if before is None:
            del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


@pytest.fixture
def page(browser, live_server, client, staff, settings):
    """A 1400 × 900 page logged in as staff (the session cookie of a forced login)."""
    settings.CONSOLE_LIVE_INTERVAL_MS = 250
    client.force_login(staff)
    context = browser.new_context(
        viewport={"width": WIDTH, "height": HEIGHT}, base_url=live_server.url
    )
    context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    opened = context.new_page()
    yield opened
    context.close()
