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
        "6543",
    )


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
