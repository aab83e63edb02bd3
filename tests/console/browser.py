"""Playwright (Python API) driving Debian's Chromium against pytest-django's live_server. No
browser is ever downloaded: CHROMIUM names the binary (default /usr/bin/chromium); without it,
or without the playwright package, the browser tests skip and say why."""

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
WIDTH, HEIGHT = 1400, 900  # the console's target: an on-call laptop


def why_no_browser() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        return f"no Chromium at {CHROMIUM} (apt-get install -y chromium, or set CHROMIUM)"
    return None


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


def screenshot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
