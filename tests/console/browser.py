"""Browser tests' helpers (their fixtures `browser` and `page` live in conftest.py): Playwright's
Python API driving Debian's Chromium against pytest-django's live_server. No browser is ever
downloaded: CHROMIUM names the binary (default /usr/bin/chromium); without it, or without the
playwright package, the browser tests skip and say why."""

import os
import shutil
from pathlib import Path

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


def screenshot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
