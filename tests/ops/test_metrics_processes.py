"""/metrics under gunicorn with two workers: counters from every worker add up in one scrape
(PROMETHEUS_MULTIPROC_DIR), whichever worker answers the scrape."""

import json

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ops.services import api_key_create
from tests.conftest import load_fixture, sign
from tests.ops.live_server import gunicorn_server

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres_only,
    pytest.mark.slow,
]
DELIVERIES = 20


def _webhook_200s(text: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "vitalflow_webhook_requests_total" and sample.labels == {
                "status": "200"
            }:
                return sample.value
    return 0.0


def test_counters_of_two_gunicorn_workers_add_up_in_every_scrape(tmp_path):
    _, key = api_key_create(name="prom", scopes=["metrics:read"])
    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()
    env = {"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    with gunicorn_server(tmp_path, workers=2, env=env) as base:
        for day in range(DELIVERIES):
            body = load_fixture("daily.json")
            body["data"][0]["metadata"]["start_time"] = f"2026-01-{day % 28 + 1:02d}T00:00:00Z"
            body["nonce"] = day  # a distinct delivery each time, not a duplicate
            raw = json.dumps(body).encode()
            with httpx.Client() as http:  # a new connection each time: workers take turns
                answer = http.post(
                    f"{base}/webhook/terra",
                    content=raw,
                    headers={"Content-Type": "application/json", "Terra-Signature": sign(raw)},
                )
            assert answer.status_code == 200
        # Each worker writes its own files (named by pid); a scrape reads them all.
        assert len({p.stem.split("_")[-1] for p in metrics_dir.glob("*.db")}) >= 2
        for _ in range(6):
            with httpx.Client() as http:
                scrape = http.get(f"{base}/metrics", headers={"X-Admin-Key": key})
            assert scrape.status_code == 200
            assert _webhook_200s(scrape.text) == DELIVERIES
