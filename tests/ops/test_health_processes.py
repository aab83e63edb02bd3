"""/metrics and /readyz of a real gunicorn whose database does not answer (its DATABASE_URL
names a port where no PostgreSQL listens): a 503 with Retry-After from /metrics, and a /readyz
that names the failing checks without telling anyone where the database is."""

import httpx
import pytest

from tests.ops.live_server import free_port, gunicorn_server

pytestmark = [pytest.mark.postgres_only, pytest.mark.slow]


@pytest.fixture
def database_down(tmp_path):
    port = free_port()  # nothing listens there
    env = {"DATABASE_URL": f"postgres://vf_role@127.0.0.1:{port}/vf", "METRICS_PUBLIC": "false"}
    with gunicorn_server(tmp_path, workers=1, env=env) as base:
        yield base, port


@pytest.fixture
def public_metrics_database_down(tmp_path):
    port = free_port()
    env = {"DATABASE_URL": f"postgres://vf_role@127.0.0.1:{port}/vf", "METRICS_PUBLIC": "true"}
    with gunicorn_server(tmp_path, workers=1, env=env) as base:
        yield base


def _assert_database_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503
    assert response.json()["code"] == "database_unavailable"
    assert response.json()["message"]
    assert int(response.headers["Retry-After"]) >= 1


def test_metrics_answer_503_with_retry_after_when_the_database_is_down(database_down):
    base, _ = database_down
    scrape = httpx.get(f"{base}/metrics", headers={"X-Admin-Key": "vfk_any"}, timeout=30)
    _assert_database_unavailable(scrape)


def test_public_metrics_answer_503_too_when_the_database_is_down(public_metrics_database_down):
    scrape = httpx.get(f"{public_metrics_database_down}/metrics", timeout=30)
    _assert_database_unavailable(scrape)


def test_readyz_names_the_failing_database_but_not_its_host_port_or_role(database_down):
    base, port = database_down
    for path in ("/readyz", "/readyz?verbose=1"):
        response = httpx.get(f"{base}{path}", headers={"X-Admin-Key": "vfk_any"}, timeout=30)
        assert response.status_code == 503
        body = response.json()
        assert body["code"] == "not_ready"
        assert body["failing"] == ["database", "migrations"]
        assert body["checks"] == {
            "database": "error",
            "migrations": "skipped",
            "broker": "not_configured",
        }
        text = response.text
        assert str(port) not in text and "127.0.0.1" not in text and "vf_role" not in text
