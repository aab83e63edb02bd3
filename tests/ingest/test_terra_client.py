"""The Terra client is polite under rate limits: a 429 or 503 is tried again after its
Retry-After, a wait longer than allowed is handed back to the caller with when to retry, and
calls are paced across processes, so the nightly reconcile never bursts. Terra is a real local
stand-in server here (it counts calls and when they came)."""

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ingest.models import TraceEvent
from ingest.tasks import reconcile_task
from ingest.terra import client as terra_client
from tests.factories import TerraConnectionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def stand_in(settings):
    """A Terra that answers from `script` (a list of (status, headers) popped per call; 200 when
    empty) and records (path, monotonic time) of every call."""
    calls: list[tuple[str, float]] = []
    script: list[tuple[int, dict]] = []

    class Terra(BaseHTTPRequestHandler):
        def _answer(self):
            calls.append((self.path.split("?")[0], time.monotonic()))
            status, headers = script.pop(0) if script else (200, {})
            body = json.dumps({"status": "success" if status == 200 else "error"}).encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Terra)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.TERRA_API_URL = f"http://127.0.0.1:{server.server_address[1]}"
    settings.TERRA_DEMO_MODE = False  # the network, not the simulator
    terra_client.set_transport(None)
    try:
        yield {"calls": calls, "script": script}
    finally:
        server.shutdown()
        server.server_close()


def _backfill():
    return terra_client.get_terra_client().request_backfill(
        terra_user_id="t-1",
        data_type="daily",
        start_date=datetime(2026, 7, 1).date(),
        end_date=datetime(2026, 7, 2).date(),
    )


def test_a_429_with_retry_after_is_tried_again_after_that_delay(stand_in):
    # Seen: a 429 was a failure at once; Retry-After was ignored.
    stand_in["script"].append((429, {"Retry-After": "1"}))
    assert _backfill() == {"status": "success"}
    (first, at_first), (second, at_second) = stand_in["calls"]
    assert first == second == "/v2/daily"
    assert at_second - at_first >= 1.0  # what Terra asked for, never sooner


def test_a_503_whose_retry_after_is_an_http_date_is_tried_again(stand_in):
    when = datetime.now(UTC) + timedelta(seconds=1)
    stand_in["script"].append((503, {"Retry-After": format_datetime(when, usegmt=True)}))
    assert _backfill() == {"status": "success"}
    assert len(stand_in["calls"]) == 2


def test_a_retry_after_longer_than_the_wait_allowed_goes_back_to_the_caller(stand_in, settings):
    settings.TERRA_API_MAX_WAIT_SECONDS = 5
    stand_in["script"].append((429, {"Retry-After": "600"}))
    with pytest.raises(terra_client.TerraRateLimited) as caught:
        _backfill()
    assert caught.value.status == 429 and caught.value.retry_after == 600
    assert len(stand_in["calls"]) == 1


def test_the_nightly_reconcile_paces_its_calls_instead_of_bursting(stand_in, settings):
    # Seen: the reconcile looped over every connection x 4 types with no pacing.
    settings.TERRA_API_RATE_PER_SECOND = 10
    for n in range(6):
        TerraConnectionFactory(terra_user_id=f"t-{n}")
    summary = reconcile_task()
    assert summary["requested"] == 24 and summary["failed"] == 0
    times = sorted(at for _, at in stand_in["calls"])
    busiest = max(sum(1 for t in times if start <= t < start + 1.0) for start in times)
    assert busiest <= 11  # 10 a second, the first slot at once
    assert TraceEvent.objects.filter(event="reconcile_run").count() == 1
