"""Settings read from the environment: safe defaults, loud refusals, a fresh checkout that works."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.settings import database_from_url, env_bool

ROOT = Path(__file__).resolve().parents[2]


def test_env_bool_refuses_words_it_does_not_know(monkeypatch):
    monkeypatch.setenv("SOME_FLAG", "yes")
    with pytest.raises(ImproperlyConfigured):
        env_bool("SOME_FLAG")


def test_database_url_names_a_postgresql_database():
    db = database_from_url("postgres://app:s%40cret@db.internal:6543/vitalflow")
    assert (db["ENGINE"], db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]) == (
        "django.db.backends.postgresql",
        "vitalflow",
        "app",
        "s@cret",
        "db.internal",
        6543,
    )
    assert db["CONN_HEALTH_CHECKS"] is True


@pytest.mark.parametrize(
    "url",
    [
        "postgres://app@%2Fvar%2Frun%2Fpostgresql/vitalflow",
        "postgresql:///vitalflow?host=/var/run/postgresql&user=app",
    ],
)
def test_database_url_with_a_unix_socket_folder(url):
    # Seen: the hand-written parser lower-cased "%2F…" into a host name nobody could resolve.
    db = database_from_url(url)
    assert (db["HOST"], db["NAME"]) == ("/var/run/postgresql", "vitalflow")


def test_database_url_in_sqlalchemy_spelling():
    # Seen: postgresql+psycopg:// (what other tools print) was refused as an unknown scheme.
    db = database_from_url("postgresql+psycopg://app:pw@db:5432/vitalflow?sslmode=require")
    assert (db["ENGINE"], db["HOST"], db["NAME"]) == (
        "django.db.backends.postgresql",
        "db",
        "vitalflow",
    )
    assert db["OPTIONS"]["sslmode"] == "require"


def test_relative_and_absolute_sqlite_paths():
    # Seen: sqlite:///var/x.sqlite3 opened /var/x.sqlite3 at the filesystem root.
    relative = database_from_url("sqlite:///var/other.sqlite3")
    assert Path(relative["NAME"]) == ROOT / "var" / "other.sqlite3"
    assert relative["OPTIONS"]["transaction_mode"] == "IMMEDIATE"  # our SQLite tuning kept
    assert database_from_url("sqlite:////tmp/abs.sqlite3")["NAME"] == "/tmp/abs.sqlite3"


def test_an_unknown_database_scheme_is_refused():
    with pytest.raises(ImproperlyConfigured):
        database_from_url("mysql://localhost/x")


def test_a_fresh_checkout_migrates_without_creating_folders_first(tmp_path):
    var = tmp_path / "not-there-yet"
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"} | {"VAR_DIR": str(var)}
    result = subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert (var / "vitalflow.sqlite3").exists()
