"""Many rows per consume task: on the ORM broker deliveries share a queued consume
task instead of queueing one each, and that task drains them in batches. django-q2's own cost
per task capped a 2-worker cluster below the webhook's rate, whatever the task did."""

import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_q.models import OrmQ

from ingest import registry
from ingest.consumer import raw_events_consume_pending
from ingest.models import ConsumeTicket, RawEvent, RawEventState
from ingest.queue import CONSUME_PENDING_TASK, TICKET_FRESH
from ingest.registry import NormalizeResult
from ingest.tasks import consume_pending
from tests.conftest import load_fixture
from tests.factories import RawEventFactory


@pytest.fixture(autouse=True)
def _no_span_to_carry(monkeypatch):
    # With OpenTelemetry's SDK installed (tests/ops/test_tracing.py leaves it for the session)
    # each delivery gets a task of its own to carry its span: these tests are about the rest.
    from ops import tracing

    monkeypatch.setattr(tracing, "traceparent", lambda: "")


def _daily(day: int) -> dict:
    payload = load_fixture("daily.json")
    payload["user"]["reference_id"] = "alice"
    payload["data"][0]["metadata"]["start_time"] = f"2026-03-{day:02d}T00:00:00+00:00"
    return payload


def _run_queued_tasks() -> dict[str, int]:
    """Run what the ORM broker holds, as a worker would (after the deliveries committed)."""
    outcomes: dict[str, int] = {}
    for message in OrmQ.objects.all():
        assert message.func() == CONSUME_PENDING_TASK
        for outcome, count in consume_pending(*message.args(), **message.kwargs()).items():
            outcomes[outcome] = outcomes.get(outcome, 0) + count
        message.delete()
    return outcomes


@pytest.mark.django_db
def test_deliveries_share_one_queued_consume_task_which_normalizes_them_all(deliver, alice):
    for day in range(1, 21):
        assert deliver(_daily(day)).status_code == 200
    # One task for twenty deliveries (main queued twenty: django-q2's per-task cost per row).
    assert OrmQ.objects.count() == 1
    assert _run_queued_tasks() == {"processed": 20}
    assert RawEvent.objects.filter(state=RawEventState.PROCESSED).count() == 20
    assert ConsumeTicket.objects.count() == 0
    # Every delivery still traces that it was queued.
    assert RawEvent.objects.filter(traces__event="queue_published").count() == 20


@pytest.mark.django_db
def test_a_delivery_after_the_task_started_queues_a_new_one(deliver, alice):
    deliver(_daily(1))
    _run_queued_tasks()
    deliver(_daily(2))
    assert OrmQ.objects.count() == 1
    assert _run_queued_tasks() == {"processed": 1}


@pytest.mark.django_db
def test_a_ticket_too_old_to_join_gets_a_new_task(deliver, alice):
    deliver(_daily(1))
    ConsumeTicket.objects.update(created_at=timezone.now() - TICKET_FRESH - timedelta(seconds=1))
    deliver(_daily(2))
    assert OrmQ.objects.count() == 2  # the old one's task may be lost or stuck


@pytest.mark.django_db
def test_a_full_batch_queues_a_successor_for_the_other_workers(monkeypatch):
    monkeypatch.setitem(registry._normalizers, "noop", lambda raw_event: NormalizeResult(ok=True))
    for _ in range(7):
        RawEventFactory(event_type="noop", payload={"type": "noop"})
    assert raw_events_consume_pending(None, batch=3) == {"processed": 7}
    assert OrmQ.objects.count() == 1  # queued when the first full batch was claimed


@pytest.mark.django_db
def test_a_task_stops_after_its_budget_and_queues_its_successor(monkeypatch):
    monkeypatch.setitem(registry._normalizers, "noop", lambda raw_event: NormalizeResult(ok=True))
    for _ in range(5):
        RawEventFactory(event_type="noop", payload={"type": "noop"})
    assert raw_events_consume_pending(None, batch=2, budget=timedelta(0)) == {"processed": 2}
    assert RawEvent.objects.filter(state=RawEventState.PENDING).count() == 3
    assert OrmQ.objects.count() == 1


@pytest.mark.django_db
def test_a_row_whose_worker_died_runs_alone_before_any_other_row_is_claimed(monkeypatch):
    # A row that kills its worker must not take its batch-mates' attempts with it: while it
    # runs, no other row is leased.
    leased_beside = []

    def suspect(raw_event):
        others = RawEvent.objects.exclude(pk=raw_event.pk).filter(next_attempt_at__isnull=False)
        leased_beside.append(others.count())
        return NormalizeResult(ok=True)

    monkeypatch.setitem(registry._normalizers, "noop", lambda raw_event: NormalizeResult(ok=True))
    monkeypatch.setitem(registry._normalizers, "suspect", suspect)
    for _ in range(5):
        RawEventFactory(event_type="noop", payload={"type": "noop"})
    RawEventFactory(
        event_type="suspect",
        payload={"type": "suspect"},
        attempts=1,
        next_attempt_at=timezone.now() - timedelta(seconds=1),  # its lease ran out
    )
    assert raw_events_consume_pending(None) == {"processed": 6}
    assert leased_beside == [0]


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_task_starting_while_a_delivery_that_joined_it_commits_still_sees_that_row(
    deliver, alice, monkeypatch
):
    """The race the ticket lock closes: a delivery joins the queued task's ticket, and that
    task starts and claims before the delivery commits. The task's DELETE of its ticket waits
    for the delivery's commit, so its claim sees the row."""
    from django.db import transaction

    deliver(_daily(1))  # a committed ticket + task
    (message,) = OrmQ.objects.all()
    joined, release = threading.Event(), threading.Event()

    def second_delivery():
        try:
            # The delivery's work (in a transaction of its own, or one statement) commits when
            # this block does: it has joined the ticket and is not committed yet.
            with transaction.atomic():
                deliver(_daily(2))
                joined.set()
                release.wait(10)
        finally:
            connections.close_all()

    thread = threading.Thread(target=second_delivery)
    thread.start()
    assert joined.wait(10)
    assert OrmQ.objects.count() == 1  # it joined the queued task
    outcome: dict = {}

    def run_task():
        try:
            outcome.update(consume_pending(*message.args(), **message.kwargs()))
        finally:
            connections.close_all()

    worker = threading.Thread(target=run_task)
    worker.start()
    worker.join(1)  # give it time to claim (it waits for the delivery that joined its ticket)
    release.set()
    thread.join(10)
    worker.join(20)
    assert outcome == {"processed": 2}
    assert not RawEvent.objects.filter(state=RawEventState.PENDING).exists()


@pytest.mark.django_db
def test_a_batch_is_written_together_on_every_database(deliver, alice, caplog):
    # Seen under make run (SQLite, Python 3.11): every batch rolled back and ran row by row,
    # logging a traceback each time, because sqlite3 reports rowcount -1 for WITH … UPDATE.
    for day in range(1, 6):
        assert deliver(_daily(day)).status_code == 200
    caplog.set_level("INFO", logger="ingest.consumer")
    with CaptureQueriesContext(connections["default"]) as queries:
        assert _run_queued_tasks() == {"processed": 5}
    assert "rolled back" not in caplog.text
    outcome_updates = [
        q["sql"] for q in queries.captured_queries if "UPDATE raw_events SET state" in q["sql"]
    ]
    assert len(outcome_updates) == 1
