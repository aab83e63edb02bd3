"""What one accepted delivery costs the web process (issue 15): it skips the middleware a signed
machine-to-machine POST has no use for, and on PostgreSQL with the ORM broker its row, queue
message and traces take two round trips instead of six. Cost figures are printed by
bench/ingest.py --accept-only; these tests pin the structure that produces them."""

import json
import tempfile

import pytest
from django.db import connection

from ingest.models import RawEvent, RawEventState, TraceEvent
from tests.conftest import load_fixture


def _refuse(*args, **kwargs):
    raise AssertionError("a webhook POST went through browser middleware")


@pytest.mark.django_db
def test_webhook_posts_skip_the_browser_middleware(deliver, monkeypatch):
    from axes.middleware import AxesMiddleware
    from django.contrib.auth.middleware import AuthenticationMiddleware
    from django.contrib.messages.middleware import MessageMiddleware
    from django.contrib.sessions.middleware import SessionMiddleware
    from django.middleware.csrf import CsrfViewMiddleware

    monkeypatch.setattr(SessionMiddleware, "process_request", _refuse)
    monkeypatch.setattr(CsrfViewMiddleware, "process_view", _refuse)
    monkeypatch.setattr(AuthenticationMiddleware, "process_request", _refuse)
    monkeypatch.setattr(MessageMiddleware, "process_request", _refuse)
    monkeypatch.setattr(AxesMiddleware, "__call__", _refuse)
    for path in ("/webhook/terra", "/webhook", "/terra", "/"):
        response = deliver({"type": "daily", "path": path}, path=path)
        assert response.status_code == 200, response.content
        assert response.json()["request_id"] == response["X-Request-ID"]
    assert RawEvent.objects.count() == 4


@pytest.mark.django_db
def test_the_shortcut_still_refuses_a_host_outside_allowed_hosts(deliver):
    response = deliver(load_fixture("daily.json"), headers={"HTTP_HOST": "evil.example"})
    assert response.status_code == 400
    assert not RawEvent.objects.exists()


@pytest.mark.django_db
def test_other_methods_and_paths_still_go_through_django(client):
    assert client.get("/webhook/terra").status_code == 405
    assert client.post("/webhook/terra/extra").status_code == 404


def _round_trips(work) -> tuple[object, int]:
    """work()'s result and the number of round trips it made on this thread's PostgreSQL
    connection, read from libpq's own protocol trace (one ReadyForQuery per round trip)."""
    from psycopg import pq

    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    with tempfile.TemporaryFile() as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            result = work()
        finally:
            pgconn.untrace()
        trace.seek(0)
        lines = trace.read().decode(errors="replace").splitlines()
    return result, sum(1 for line in lines if "ReadyForQuery" in line)


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_a_new_delivery_is_two_round_trips_on_postgresql(deliver):
    # Seen: health check, BEGIN, INSERT raw_events, ORM save of the task, INSERT traces, COMMIT
    # (inside a test's transaction: savepoint and release instead of BEGIN/COMMIT).
    # The first delivery for a Terra user stamps its connection's last_webhook_at (at most once
    # a minute per connection and process, after the row's statement).
    deliver({**load_fixture("daily.json"), "warm": True})
    response, trips = _round_trips(lambda: deliver(load_fixture("daily.json")))
    assert response.status_code == 200
    assert trips == 2  # the row's id from its sequence, then one statement
    row = RawEvent.objects.get(pk=response.json()["raw_event_id"])
    events = sorted(TraceEvent.objects.filter(raw_event=row).values_list("event", flat=True))
    assert events == ["queue_published", "webhook_received"]


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_a_duplicate_is_two_round_trips_and_queues_nothing(deliver):
    from django_q.models import OrmQ

    raw = json.dumps(load_fixture("daily.json")).encode()
    deliver(raw)
    response, trips = _round_trips(lambda: deliver(raw))
    assert response.json() == {"ok": True, "duplicate": True}
    assert trips == 2
    assert OrmQ.objects.count() == 1
    assert TraceEvent.objects.count() == 2


@pytest.mark.django_db
def test_the_queue_message_is_the_one_django_q_would_have_built(deliver, settings):
    from django_q.models import OrmQ
    from django_q.signing import SignedPackage

    response = deliver(load_fixture("daily.json"))
    pk = response.json()["raw_event_id"]
    message = OrmQ.objects.get()
    task = SignedPackage.loads(message.payload)
    assert task["func"] == "ingest.tasks.consume_raw_event"
    assert task["args"] == (pk,)
    assert task["name"] == f"consume-{pk}"
    assert task["save"] is False
    assert set(task["kwargs"]) <= {"traceparent"}  # only with a recording span (otel)
    assert len(task["id"]) == 32
    assert message.key == settings.Q_CLUSTER["name"]
    assert message.lock is not None


@pytest.mark.django_db
def test_the_message_runs_the_consumer(deliver):
    """The message a delivery queued, run the way a django-q2 worker runs it."""
    from django.utils.module_loading import import_string
    from django_q.models import OrmQ
    from django_q.signing import SignedPackage

    response = deliver(load_fixture("daily.json"))
    task = SignedPackage.loads(OrmQ.objects.get().payload)
    import_string(task["func"])(*task["args"], **task["kwargs"])
    row = RawEvent.objects.get(pk=response.json()["raw_event_id"])
    assert row.state != RawEventState.PENDING  # claimed and given an outcome


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_connection_cut_while_idle_is_replaced_not_answered_503(deliver):
    """Django's per-request health check (a SELECT 1 before each request's first query) is not
    run on this path; a connection the server dropped between deliveries is retried once."""
    import psycopg

    deliver({"type": "daily", "first": True})  # the connection is open and idle now
    pid = connection.connection.info.backend_pid
    settings_dict = connection.settings_dict
    with psycopg.connect(
        host=settings_dict["HOST"] or None,
        port=settings_dict["PORT"] or None,
        user=settings_dict["USER"],
        dbname=settings_dict["NAME"],
        autocommit=True,
    ) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    response = deliver(load_fixture("daily.json"))
    assert response.status_code == 200, response.content
    assert RawEvent.objects.filter(pk=response.json()["raw_event_id"]).exists()
    assert connection.connection.info.backend_pid != pid


def test_the_shortcut_paths_are_the_routed_ones():
    from django.urls import resolve

    from ingest.webhook import WEBHOOK_PATHS, terra_webhook
    from ingest.webhook_urls import urlpatterns

    assert {f"/{pattern.pattern}" for pattern in urlpatterns} == WEBHOOK_PATHS
    for path in WEBHOOK_PATHS:
        assert resolve(path).func is terra_webhook


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_a_delivery_is_one_round_trip(deliver):
    # The first delivery on a connection draws its id (SELECT nextval), and each statement
    # draws the next delivery's.
    deliver({**load_fixture("daily.json"), "warm": True})
    response, trips = _round_trips(lambda: deliver(load_fixture("daily.json")))
    assert response.status_code == 200
    assert trips == 1
    assert RawEvent.objects.filter(pk=response.json()["raw_event_id"]).exists()


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_sequence_reset_under_a_drawn_id_still_stores_the_delivery(deliver):
    import hashlib

    first = deliver({**load_fixture("daily.json"), "n": 1}).json()["raw_event_id"]
    drawn = first + 1  # what the first statement drew for the next delivery
    # An operator empties the table and restarts its ids; another writer takes the drawn id.
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE raw_events RESTART IDENTITY CASCADE")
    while (taken := RawEvent.objects.create(event_type="daily", dedup_key="x").pk) < drawn:
        RawEvent.objects.filter(pk=taken).update(
            dedup_key=hashlib.sha256(b"%d" % taken).hexdigest()
        )
    response = deliver({**load_fixture("daily.json"), "n": 2})
    assert response.status_code == 200
    assert "duplicate" not in response.json()
    assert RawEvent.objects.filter(pk=response.json()["raw_event_id"], event_type="daily").exists()
