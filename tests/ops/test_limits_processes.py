"""One limit across processes: two gunicorn workers enforce one user's rate together, through
the database cache table (no REDIS_URL) or Redis (a private redis-server on a free port)."""

import shutil
import subprocess
import time

import httpx
import pytest

from ops.services import user_token_create
from tests.factories import UserFactory
from tests.ops.live_server import free_port, gunicorn_server

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres_only,
    pytest.mark.slow,
]
LIMIT, REQUESTS = 5, 16


@pytest.fixture
def redis_url(tmp_path):
    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed")
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        + ["--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        import redis

        for _ in range(100):
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _count_answers(base: str, token: str) -> dict[int, int]:
    answers: dict[int, int] = {}
    for _ in range(REQUESTS):
        with httpx.Client() as http:  # a new connection each time: the workers take turns
            response = http.get(f"{base}/v1/me", headers={"Authorization": f"Bearer {token}"})
        answers[response.status_code] = answers.get(response.status_code, 0) + 1
        if response.status_code == 429:
            assert response.json()["code"] == "throttled"
            assert int(response.headers["Retry-After"]) >= 1
    return answers


@pytest.mark.parametrize("cache", ["database", "redis"])
def test_two_gunicorn_workers_enforce_one_shared_user_limit(cache, request, tmp_path):
    env = {"THROTTLE_USER_RATE": f"{LIMIT}/hour", "ME_RECONCILE_SECONDS": "3600"}
    if cache == "redis":
        env["REDIS_URL"] = request.getfixturevalue("redis_url")
    _, token = user_token_create(user=UserFactory(username="alice"))
    with gunicorn_server(tmp_path, workers=2, env=env) as base:
        answers = _count_answers(base, token)
    # Per-process memory would let each worker allow LIMIT: up to 2 × LIMIT 200s.
    assert answers == {200: LIMIT, 429: REQUESTS - LIMIT}
