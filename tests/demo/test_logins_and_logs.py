"""Logins you can find, a terminal you can read: `make run` writes its logins to a file only
its owner reads, replaces them at each start, and keeps access and task logs off unless asked."""

import logging
import os
import stat
import subprocess

import pytest
from django.contrib.auth import get_user_model

from demo.logins import FILE_NAME, logins_create, logins_write


@pytest.mark.django_db
def test_the_logins_file_is_private_and_sets_the_tours_variables(tmp_path, api):
    # Seen: the admin password appeared only in the banner, buried by log lines within 15 s.
    old = tmp_path / FILE_NAME
    old.write_text("stale")
    old.chmod(0o644)
    logins = logins_create(operator="admin", demo_user="demo")
    path = logins_write(logins, base="http://127.0.0.1:8123", folder=tmp_path)
    assert path == old and stat.S_IMODE(path.stat().st_mode) == 0o600
    shell = subprocess.run(
        ["sh", "-c", f'. "{path}" && echo "$BASE $ADMIN_USER $ADMIN_PASSWORD $TOKEN $KEY"'],
        capture_output=True,
        text=True,
        check=True,
    )
    expected = ["http://127.0.0.1:8123", "admin", logins.password, logins.token, logins.admin_key]
    assert shell.stdout.split() == expected
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {logins.token}")
    assert api.get("/v1/me").status_code == 200
    api.credentials(HTTP_X_ADMIN_KEY=logins.admin_key)
    assert api.get("/v1/admin/dlq").status_code == 200
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(logins.password)


@pytest.mark.django_db
def test_a_new_start_replaces_the_demo_logins(api):
    first = logins_create(operator="admin", demo_user="demo")
    second = logins_create(operator="admin", demo_user="demo")
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {first.token}")
    assert api.get("/v1/me").status_code == 401
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {second.token}")
    assert api.get("/v1/me").status_code == 200


def test_make_run_keeps_access_logs_off_unless_asked(monkeypatch, settings):
    from demo.management.commands.rundemo import Command
    from ops.supervisor import bind_listener

    # Whatever quiet_logs() sets is undone after the test (monkeypatch restores what it saw).
    monkeypatch.setenv("LOG_LEVEL", "INFO")
    monkeypatch.delenv("LOG_LEVEL")
    settings.DEMO_VERBOSE = False
    sock, root_level = bind_listener("127.0.0.1", 0), logging.getLogger().level
    try:
        quiet = Command().quiet_logs()
        web = {child.name: child.argv for child in Command().children(sock, quiet=quiet)}["web"]
        assert quiet and os.environ["LOG_LEVEL"] == "WARNING"
        assert "--access-logfile" not in web and web[web.index("--log-level") + 1] == "warning"
        monkeypatch.delenv("LOG_LEVEL")
        settings.DEMO_VERBOSE = True
        verbose = Command().quiet_logs()
        web = {child.name: child.argv for child in Command().children(sock, quiet=verbose)}["web"]
        assert not verbose and "LOG_LEVEL" not in os.environ and "--access-logfile" in web
    finally:
        sock.close()
        logging.getLogger().setLevel(root_level)
