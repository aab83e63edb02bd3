"""What one accepted delivery costs the web process: it skips the middleware a signed
machine-to-machine POST has no use for, and on PostgreSQL with the ORM broker its row, its place in the
queue (a consume ticket) and its traces are one statement: one round trip. Cost figures are printed by
bench/ingest.py --accept-only; these tests pin the structure that produces them."""

import json
import tempfile

import pytest
from django.db import connection

from ingest.models import RawEvent, RawEventState, TraceEvent
from tests.conftest import load_fixture


@pytest.fixture(autouse=True)
def _no_span_to_carry(monkeypatch):
    # With OpenTelemetry's SDK installed (tests/ops/test_tracing.py leaves it for the session)
    # each delivery gets a task of its own to carry its span (tested there).
    from ops import tracing

    monkeypatch.setattr(tracing, "traceparent", lambda: "")


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


@pytest.fixture
def ticket_stays_fresh(monkeypatch):
    """A consume ticket is joined for 2 s; a slow test machine must not see it expire."""
    from datetime import timedelta

    from ingest import queue

    monkeypatch.setattr(queue, "TICKET_FRESH", timedelta(hours=1))


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_a_new_delivery_is_one_round_trip_on_postgresql(deliver, ticket_stays_fresh):
    # Seen: health check, BEGIN, INSERT raw_events, the ticket (SELECT … FOR KEY SHARE), INSERT
    # traces, COMMIT (inside a test's transaction: a savepoint and its release instead).
    # The first delivery for a Terra user also stamps its connection's last_webhook_at (at most
    # once a minute per connection and process), and the first one makes the consume ticket.
    deliver({**load_fixture("daily.json"), "warm": True})
    response, trips = _round_trips(lambda: deliver(load_fixture("daily.json")))
    assert response.status_code == 200
    assert trips == 1
    row = RawEvent.objects.get(pk=response.json()["raw_event_id"])
    events = sorted(TraceEvent.objects.filter(raw_event=row).values_list("event", flat=True))
    assert events == ["queue_published", "webhook_received"]


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_a_duplicate_is_one_round_trip_and_queues_nothing(deliver, ticket_stays_fresh):
    from django_q.models import OrmQ

    raw = json.dumps(load_fixture("daily.json")).encode()
    deliver(raw)
    response, trips = _round_trips(lambda: deliver(raw))
    assert response.json() == {"ok": True, "duplicate": True}
    assert trips == 1
    assert OrmQ.objects.count() == 1
    assert TraceEvent.objects.count() == 2


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_the_delivery_statement_is_parsed_once_per_connection_not_per_delivery(
    deliver, ticket_stays_fresh
):
    # Seen: PostgreSQL parsed and planned the five-part statement for every delivery, most of
    # its CPU per delivery (bench/README.md, eleventh pass).
    def delivery_statements():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT generic_plans + custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE 'WITH queued AS%%'"
            )
            return [runs for (runs,) in cursor.fetchall()]

    for n in range(4):
        response = deliver({**load_fixture("daily.json"), "n": n})
        assert response.status_code == 200, response.content
    assert RawEvent.objects.count() == 4
    assert delivery_statements() == [4]


@pytest.mark.django_db
def test_deliveries_share_one_queued_task_and_it_runs_the_consumer(deliver):
    """The task the deliveries queued, run the way a django-q2 worker runs it."""
    from django.utils.module_loading import import_string
    from django_q.models import OrmQ
    from django_q.signing import SignedPackage

    ids = [deliver({**load_fixture("daily.json"), "n": n}).json()["raw_event_id"] for n in (1, 2)]
    (message,) = OrmQ.objects.all()
    task = SignedPackage.loads(message.payload)
    import_string(task["func"])(*task["args"], **task["kwargs"])
    for row in RawEvent.objects.filter(pk__in=ids):
        assert row.state != RawEventState.PENDING  # claimed and given an outcome
    outcomes = TraceEvent.objects.filter(raw_event_id__in=ids, event="queue_published")
    assert outcomes.count() == 2


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

    from ingest.urls import webhook_urlpatterns as urlpatterns
    from ingest.webhook import WEBHOOK_PATHS, terra_webhook

    assert {f"/{pattern.pattern}" for pattern in urlpatterns} == WEBHOOK_PATHS
    for path in WEBHOOK_PATHS:
        assert resolve(path).func is terra_webhook


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_a_refused_delivery_leaves_no_watch_on_its_connection(deliver, settings):
    # Seen: work that ended with a refusal (401) stayed armed, so the watchdog shut the
    # connection down under a later request on the same thread.
    from ops import deadline

    settings.TERRA_WEBHOOK_DB_DEADLINE_SECONDS = 30
    assert deliver(load_fixture("daily.json"), secret="wrong").status_code == 401
    assert deliver(load_fixture("daily.json")).status_code == 200
    assert deadline._watchdog._armed == {}
    assert deadline._watchdog._fired == set()
