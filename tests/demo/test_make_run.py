"""`make run` checked as a user would: the real process set on a free port, read through its
terminal, its logins file and its API. It comes up with the banner and little else, data keeps
arriving after the first load, and the tour's sample upload comes back parsed."""

import stat
import sys

import httpx
import pytest

from tests.demo.terminal import free_port, read_logins, running, wait_for
from tests.demo.test_rundemo import ROOT, demo_env

pytestmark = [pytest.mark.slow, pytest.mark.postgres_only]

SAMPLE = ROOT / "examples" / "sample-lab-report.pdf"
# The auth and 14 days (57 deliveries), then the auth's 90-day backfill: 365 rows at least.
FIRST_LOAD = 365
# Log lines a busy terminal showed (gunicorn access log, httpx per delivery, django-q per task).
NOISE = ('"POST /webhook/terra', "HTTP Request:", "INFO django-q", "[INFO]")


@pytest.fixture
def make_run(tmp_path):
    """A running `manage.py rundemo` (what `make run` runs) and its terminal; stopped by
    Ctrl-C (SIGINT) after the test."""
    argv = [sys.executable, "manage.py", "rundemo", "--port", str(free_port())]
    with running(argv, cwd=ROOT, env=demo_env(tmp_path)) as terminal:
        yield terminal, tmp_path / "var"


def test_make_run_comes_up_quiet_and_data_keeps_arriving(make_run):
    terminal, var = make_run
    wait_for("the banner", lambda: "vitalflow is running" in terminal.text, timeout=240)
    logins_file = var / "demo-logins.env"
    assert stat.S_IMODE(logins_file.stat().st_mode) == 0o600
    assert f"logins    {logins_file}" in terminal.text
    logins = read_logins(logins_file)
    assert logins["ADMIN_PASSWORD"] in terminal.text  # the banner shows what the file holds
    base, key, token = logins["BASE"], logins["KEY"], logins["TOKEN"]

    with httpx.Client(base_url=base, timeout=30) as client:

        def raw_events() -> int:
            answer = client.get("/v1/admin/users/demo", headers={"X-Admin-Key": key})
            return answer.json()["raw_events"] if answer.status_code == 200 else 0

        wait_for("the first load", lambda: raw_events() >= FIRST_LOAD, timeout=240)
        first = raw_events()
        # One delivery a minute, each with new bytes: two more rows within three minutes (the
        # backfill's last row, if it was still on its way, cannot make both).
        wait_for("two minutes of feed", lambda: raw_events() >= first + 2, timeout=200)

        upload = client.post(
            "/v1/labs/upload",
            headers={"Authorization": f"Bearer {token}"},
            files={"file": (SAMPLE.name, SAMPLE.read_bytes(), "application/pdf")},
        )
        assert upload.status_code == 202, upload.text
        detail = f"/v1/labs/uploads/{upload.json()['upload_id']}"

        def parsed() -> bool:
            answer = client.get(detail, headers={"Authorization": f"Bearer {token}"})
            return answer.json().get("terra_status") == "parsed"

        wait_for("the sample report parsed", parsed, timeout=120)

    noise = [line for line in terminal.lines if any(mark in line for mark in NOISE)]
    assert noise == []
    assert len(terminal.lines) < 40, terminal.text  # the banner and little else
