"""Operator commands: setup_schedules, terra_reconcile, wipe_user, sync_pull — called as
commands, with --help that explains itself."""

import sqlite3
from datetime import date, timedelta
from io import StringIO

import httpx
import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from django_q.models import Schedule

from ingest.management.commands import sync_pull
from ingest.models import DailySummary, SleepSession, TerraConnection
from ops.models import AuditLog
from ops.services import user_token_create
from tests.factories import TerraConnectionFactory

pytestmark = pytest.mark.django_db


def run(*args, **kwargs) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO(), **kwargs)
    return out.getvalue()


@pytest.mark.parametrize(
    "command,words",
    [
        ("setup_schedules", "terra-drain"),
        ("terra_reconcile", "backfill"),
        ("wipe_user", "--yes"),
        ("sync_pull", "--token"),
    ],
)
def test_each_command_explains_itself(command, words, capsys):
    with pytest.raises(SystemExit):
        call_command(command, "--help")
    assert words in capsys.readouterr().out


def test_setup_schedules_is_idempotent():
    first = run("setup_schedules")
    rows = sorted(Schedule.objects.values_list("id", "name", "next_run"))
    second = run("setup_schedules")
    assert sorted(Schedule.objects.values_list("id", "name", "next_run")) == rows
    assert "created" in first and "created" not in second


def test_terra_reconcile_for_one_user_reconciles_then_backfills(alice, terra):
    TerraConnectionFactory(user=alice, terra_user_id="t-a")
    TerraConnectionFactory(terra_user_id="t-someone-else")
    terra.on(
        "GET",
        "/v2/subscriptions",
        (200, {"users": [{"user_id": "t-a", "provider": "GARMIN", "reference_id": "alice"}]}),
    )
    out = run("terra_reconcile", "--user", "alice", "--days", "3")
    assert "connections 1: 4 backfill requests sent, 0 failed (3 days)" in out
    backfills = [r for r in terra.requests if "user_id" in r.url.params]
    assert {r.url.params["user_id"] for r in backfills} == {"t-a"}


def test_terra_reconcile_refuses_unknown_users_and_bad_days():
    with pytest.raises(CommandError):
        run("terra_reconcile", "--user", "nobody")
    with pytest.raises(CommandError):
        run("terra_reconcile", "--days", "0")


def test_wipe_user_with_yes_deletes_and_prints_counts(alice):
    TerraConnectionFactory(user=alice)
    out = run("wipe_user", "alice", "--yes")
    assert "terra_connections    1" in out and "wiped alice" in out
    assert not TerraConnection.objects.exists()
    assert AuditLog.objects.get(action="user.wipe").actor == "command:wipe_user"


def test_wipe_user_asks_and_aborts_on_a_wrong_answer(alice, monkeypatch):
    monkeypatch.setattr("builtins.input", lambda prompt: "no")
    with pytest.raises(CommandError, match="aborted"):
        run("wipe_user", "alice")
    assert type(alice).objects.filter(username="alice").exists()


def test_wipe_user_unknown_is_an_error():
    with pytest.raises(CommandError, match="nobody"):
        run("wipe_user", "nobody", "--yes")


@pytest.fixture
def through_django(monkeypatch):
    """sync_pull's httpx client talks to this Django app in-process (same DB connection).
    Like Django's test client, keep request signals from closing the test's connection."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    monkeypatch.setattr(sync_pull, "transport", httpx.WSGITransport(app=WSGIHandler()))
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def test_sync_pull_mirrors_then_pulls_only_changes(alice, tmp_path, through_django):
    _, token = user_token_create(user=alice)
    start = timezone.now() - timedelta(days=40)
    DailySummary.objects.bulk_create(
        DailySummary(
            user=alice,
            source="garmin",
            date=date(2026, 1, 1) + timedelta(days=d),
            steps=d,
            updated_at=start + timedelta(days=d),
        )
        for d in range(40)
    )
    SleepSession.objects.create(
        user=alice, source="oura", start_time=start, raw={"big": 1}, updated_at=start
    )
    out_file = str(tmp_path / "alice.sqlite")
    args = ["sync_pull", "--url", "http://testserver", "--token", token, "--out", out_file]

    out = run(*args, "--limit", "7")
    assert "pulled 41 rows in 6 page(s)" in out
    db = sqlite3.connect(out_file)
    assert db.execute("SELECT count(*) FROM daily_summary").fetchone()[0] == 40
    assert db.execute("SELECT steps FROM daily_summary ORDER BY date LIMIT 1").fetchone()[0] == 0

    assert "pulled 0 rows" in run(*args)

    row = DailySummary.objects.filter(user=alice).order_by("date").first()
    row.steps = 12345
    row.updated_at = timezone.now()
    row.save()
    assert "pulled 1 rows" in run(*args)
    assert (
        db.execute("SELECT steps FROM daily_summary ORDER BY date LIMIT 1").fetchone()[0] == 12345
    )
    assert db.execute("SELECT count(*) FROM daily_summary").fetchone()[0] == 40


def test_sync_pull_with_a_bad_token_fails_cleanly(tmp_path, through_django, db):
    with pytest.raises(CommandError, match="401"):
        run(
            "sync_pull",
            "--url",
            "http://testserver",
            "--token",
            "nope",
            "--out",
            str(tmp_path / "x.sqlite"),
        )
