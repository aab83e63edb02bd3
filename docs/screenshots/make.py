"""Make the screenshots in this folder: the console with a frozen queue cluster, /api/docs/ with
every off-box request blocked, and /readyz?verbose=1 in the same frozen state.

    python docs/screenshots/make.py [--port 8123] [--chromium /usr/bin/chromium-headless-shell]

Needs playwright (`pip install playwright`) and a headless Chromium: `playwright install
chromium`, or Debian's `chromium-headless-shell` package passed with --chromium. Runs the service
from this checkout on SQLite in a temporary VAR_DIR: `serve --only web --only runner`, and a
`qcluster` in its own process group that is frozen with SIGSTOP once it has beaten."""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import date, timedelta
from pathlib import Path

from playwright.sync_api import sync_playwright

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BEAT = 2  # HEARTBEAT_SECONDS of every process: a cluster is stale after 4 s without a beat
WAIT_SECONDS = 120
ADMIN, PASSWORD = "operator", "screenshots-only-password"
WEBHOOK_SECRET = "screenshots-webhook-secret"


def service_env(var_dir: str, base: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        VAR_DIR=var_dir,
        REDIS_URL="",
        SECRET_KEY="screenshots-only-secret-key",
        TERRA_WEBHOOK_SECRET=WEBHOOK_SECRET,
        TERRA_DEMO_WEBHOOK_URL=f"{base}/webhook/terra",  # demo-mode backfills come here
        HEARTBEAT_SECONDS=str(BEAT),
        LOG_LEVEL="WARNING",
        DJANGO_SUPERUSER_USERNAME=ADMIN,
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
        DJANGO_SUPERUSER_EMAIL="operator@example.com",
    )
    return env


def manage(env: dict, *args: str) -> None:
    subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def spawn(env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: SIGSTOP reaches every child
    )


def stop(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGCONT)
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# /readyz?verbose=1 lists the workers only for an operator key with metrics:read.
READYZ_KEY = {"X-Admin-Key": ""}


def metrics_key(env: dict) -> str:
    created = subprocess.run(
        [sys.executable, "manage.py", "create_api_key", "--name", "screenshots"]
        + ["--scopes", "metrics:read"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return created.stdout.strip()


def readyz(base: str) -> dict:
    request = urllib.request.Request(f"{base}/readyz?verbose=1", headers=READYZ_KEY)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.load(response)
    except OSError:
        return {}


def wait_until(base: str, predicate) -> dict:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        state = readyz(base)
        if state and predicate(state):
            return state
        time.sleep(0.5)
    raise SystemExit(f"gave up waiting; last /readyz?verbose=1: {readyz(base)}")


def clusters(state: dict, pid: int) -> list[dict]:
    return [w for w in state.get("workers", []) if w["kind"] == "cluster" and w["pid"] == pid]


def screenshot(chromium: str | None, base: str) -> None:
    blocked: list[str] = []

    def local_only(route):
        if route.request.url.startswith(base):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.route("**/*", local_only)  # no internet: anything off this server fails
        page.goto(f"{base}/admin/login/?next=/admin/")
        page.fill("#id_username", ADMIN)
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.wait_for_url(f"{base}/admin/")
        assert "No live consumer" in page.content(), "dashboard shows no banner"
        page.screenshot(path=HERE / "dashboard-stopped-cluster.png", full_page=True)

        page.goto(f"{base}/api/docs/")
        page.wait_for_selector(".swagger-ui .info .title", timeout=30_000)
        page.wait_for_selector(".opblock", timeout=30_000)
        page.screenshot(path=HERE / "api-docs-offline.png")
        browser.close()
    if blocked:
        raise SystemExit(f"pages asked for off-box resources: {blocked}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--chromium", help="a Chromium binary (default: playwright's own)")
    args = parser.parse_args()
    base = f"http://127.0.0.1:{args.port}"
    with tempfile.TemporaryDirectory(prefix="vf-shots-") as var_dir:
        env = service_env(var_dir, base)
        manage(env, "migrate", "--noinput")
        manage(env, "setup_schedules")
        manage(env, "collectstatic", "--noinput")
        manage(env, "createsuperuser", "--noinput")
        READYZ_KEY["X-Admin-Key"] = metrics_key(env)
        manage(env, "shell", "-c", "from django.contrib.auth.models import User; "
               "[User.objects.create_user(n) for n in ('demo', 'late')]")  # fmt: skip
        web = spawn(env, "serve", "--port", str(args.port), "--workers", "1",
                    "--only", "web", "--only", "runner")  # fmt: skip
        cluster = spawn(env, "qcluster")
        try:
            wait_until(base, lambda s: any(not w["stale"] for w in clusters(s, cluster.pid)))
            yesterday = (date.today() - timedelta(days=1)).isoformat()
            manage(env, "terra_simulate", "--url", f"{base}/webhook/terra", "--days", "2",
                   "--end-date", yesterday)  # fmt: skip
            time.sleep(3 * BEAT)  # the live cluster takes what arrived
            os.killpg(cluster.pid, signal.SIGSTOP)  # sentinel, workers and pusher alike
            # A user who connects now: their auth and today's data wait, nobody consumes them.
            manage(env, "terra_simulate", "--url", f"{base}/webhook/terra", "--days", "1",
                   "--user", "late")  # fmt: skip
            time.sleep(3 * BEAT)  # past two missed beats
            frozen = wait_until(base, lambda s: all(w["stale"] for w in clusters(s, cluster.pid)))
            (HERE / "readyz-stopped-cluster.json").write_text(json.dumps(frozen, indent=2) + "\n")
            screenshot(args.chromium, base)
        finally:
            stop(cluster)
            stop(web)
    for name in ("dashboard-stopped-cluster.png", "api-docs-offline.png"):
        print(f"{name}: {(HERE / name).stat().st_size // 1024} KB")


if __name__ == "__main__":
    main()
