"""/healthz and /readyz: what an orchestrator's probes see."""

import socket

import pytest
from django.db import OperationalError, connections
from django.test import Client

from ops import health


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_healthz_answers_without_touching_the_database(client):
    # No django_db mark: any database access in this test raises.
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_is_ok_when_database_migrations_and_broker_answer(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"] == {"database": "ok", "migrations": "ok", "broker": "not_configured"}


@pytest.mark.django_db
def test_readyz_names_an_unreachable_redis_broker(client, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["code"] == "not_ready"
    assert body["failing"] == ["broker"]
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["broker"].startswith("error: ")


@pytest.mark.django_db
def test_readyz_names_the_database_when_it_does_not_answer(client, monkeypatch):
    def refuse(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(health, "_migrations_applied", False)
    monkeypatch.setattr(connections["default"], "cursor", refuse)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["failing"] == ["database", "migrations"]
    assert "connection refused" in response.json()["checks"]["database"]


@pytest.mark.django_db
def test_readyz_names_unapplied_migrations(client, monkeypatch):
    class PendingExecutor:
        def __init__(self, connection):
            from django.db.migrations.loader import MigrationLoader

            self.loader = MigrationLoader(connection)

        def migration_plan(self, targets):
            migration = self.loader.graph.nodes[("ops", "0001_initial")]
            return [(migration, False)]

    monkeypatch.setattr(health, "_migrations_applied", False)
    monkeypatch.setattr("django.db.migrations.executor.MigrationExecutor", PendingExecutor)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["failing"] == ["migrations"]
    assert "ops.0001_initial" in response.json()["checks"]["migrations"]


@pytest.mark.django_db
def test_probes_need_no_credentials_and_skip_the_https_redirect(settings):
    settings.SECURE_SSL_REDIRECT = True
    anonymous = Client()
    assert anonymous.get("/healthz").status_code == 200
    assert anonymous.get("/readyz").status_code == 200
