"""/healthz and /readyz: what an orchestrator's probes see."""

import socket

import pytest
from django.test import Client

from ops import health
from ops.services import api_key_create


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
def test_readyz_names_an_unreachable_redis_broker_without_saying_where_it_is(client, settings):
    port = free_port()
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"  # nothing listens there
    for path in ("/readyz", "/readyz?verbose=1"):
        response = client.get(path)
        assert response.status_code == 503
        body = response.json()
        assert body["code"] == "not_ready"
        assert body["failing"] == ["broker"]
        assert body["checks"] == {"database": "ok", "migrations": "ok", "broker": "error"}
        assert str(port) not in response.content.decode()
        assert "workers" not in body


@pytest.mark.django_db
@pytest.mark.parametrize("scopes", [["metrics:read"], ["*"]])
def test_an_operator_key_with_metrics_read_sees_what_failed_and_the_workers(
    client, settings, scopes
):
    port = free_port()
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
    _, key = api_key_create(name="prom", scopes=scopes)
    body = client.get("/readyz?verbose=1", HTTP_X_ADMIN_KEY=key).json()
    assert body["checks"]["broker"].startswith("error: ")
    assert str(port) in body["checks"]["broker"]
    assert body["workers"] == []
    bearer = client.get("/readyz", HTTP_AUTHORIZATION=f"Bearer {key}").json()
    assert str(port) in bearer["checks"]["broker"]


@pytest.mark.django_db
def test_a_key_without_metrics_read_sees_only_names_and_states(client, settings):
    port = free_port()
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
    _, key = api_key_create(name="ingest", scopes=["ingest:admin"])
    response = client.get("/readyz?verbose=1", HTTP_X_ADMIN_KEY=key)
    assert response.json()["checks"]["broker"] == "error"
    assert "workers" not in response.json()
    assert "metrics:read" in response.json()["details"]
    assert str(port) not in response.content.decode()


@pytest.mark.django_db
def test_a_staff_session_sees_the_details_as_the_console_does(admin_client, settings):
    port = free_port()
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
    body = admin_client.get("/readyz?verbose=1").json()
    assert str(port) in body["checks"]["broker"]
    assert body["workers"] == []


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
    assert response.json()["checks"]["migrations"] == "error"
    _, key = api_key_create(name="prom", scopes=["metrics:read"])
    detailed = client.get("/readyz", HTTP_X_ADMIN_KEY=key).json()
    assert "ops.0001_initial" in detailed["checks"]["migrations"]


@pytest.mark.django_db
def test_probes_need_no_credentials_and_skip_the_https_redirect(settings):
    settings.SECURE_SSL_REDIRECT = True
    anonymous = Client()
    assert anonymous.get("/healthz").status_code == 200
    assert anonymous.get("/readyz").status_code == 200
