"""The consumer's state machine: processed, skipped, parked, retrying → dead, claims
and no-op re-consumption."""

from datetime import timedelta

import pytest
from django.utils import timezone

from ingest import registry
from ingest.consumer import raw_event_consume, raw_events_consume_batch
from ingest.decisions import MAX_ATTEMPTS
from ingest.drain import raw_events_drain
from ingest.models import DailySummary, RawEvent, RawEventState, TerraConnection, TraceEvent
from ingest.registry import NormalizeResult
from ingest.tasks import consume_raw_event
from tests.factories import RawEventFactory
from tests.ingest.conftest import TERRA_USER

pytestmark = pytest.mark.django_db

SKIPPED = [
    "athlete",
    "menstruation",
    "nutrition",
    "large_request_processing",
    "large_request_sending",
    "permission_change",
    "connection_error",
]


@pytest.mark.parametrize("name", SKIPPED)
def test_skip_list_fixtures_are_acknowledged_as_skipped(post, fixture_payload, name):
    post(fixture_payload(f"{name}.json"))
    row = RawEvent.objects.get()
    assert row.state == RawEventState.SKIPPED
    assert row.process_error == f"skipped:{name}"
    assert row.processed_at is not None


@pytest.mark.parametrize("event_type", ["request_processing", "healthcheck"])
def test_informational_types_without_fixtures_are_skipped(post, event_type):
    post({"type": event_type, "status": "success"})
    assert RawEvent.objects.get().process_error == f"skipped:{event_type}"


def test_unknown_type_is_skipped_with_its_name(post):
    post({"type": "glucose_party", "data": []})
    row = RawEvent.objects.get()
    assert (row.state, row.process_error) == (
        RawEventState.SKIPPED,
        "skipped:unknown_type:glucose_party",
    )


@pytest.mark.parametrize("event_type", ["body", "lab_report"])
def test_types_awaiting_their_normalizer_park_with_no_normalizer(
    post, fixture_payload, monkeypatch, event_type
):
    monkeypatch.delitem(registry._normalizers, event_type, raising=False)
    payload = (
        fixture_payload("body.json")
        if event_type == "body"
        else fixture_payload("lab_report.completed.json")
    )
    post(payload)
    row = RawEvent.objects.get()
    assert (row.state, row.process_error) == (RawEventState.PARKED, "no_normalizer")
    assert row.processed_at is None


def test_data_without_a_connection_parks_and_resolves_once_its_auth_arrives(post, fixture_payload):
    post(fixture_payload("daily.json"))  # reference "your-user-123": no such user yet
    daily = RawEvent.objects.get(event_type="daily")
    assert (daily.state, daily.process_error) == (
        RawEventState.PARKED,
        "no_connection_for_terra_user",
    )
    assert not DailySummary.objects.exists()
    assert TraceEvent.objects.filter(raw_event=daily, event="parked").exists()

    post(fixture_payload("auth.json"))  # creates the user and the connection

    daily.refresh_from_db()
    assert daily.state == RawEventState.PROCESSED
    assert daily.process_error is None
    summary = DailySummary.objects.get()
    assert summary.user.username == "your-user-123"
    assert daily.user == summary.user
    assert TerraConnection.objects.get().terra_user_id == TERRA_USER


def test_a_parked_no_connection_row_is_left_alone_by_the_drain(post, fixture_payload):
    post(fixture_payload("daily.json"))
    assert raw_events_drain(inline=True).selected == 0
    result = raw_events_drain(inline=True, include_no_connection=True)
    assert result.selected == 1 and result.outcomes == {"parked": 1}


@pytest.fixture
def exploding(monkeypatch):
    calls = []

    def explode(raw_event):
        calls.append(raw_event.pk)
        raise RuntimeError("normalizer bug")

    monkeypatch.setitem(registry._normalizers, "exploding", explode)
    return calls


def test_normalizer_exception_backs_off_exponentially_then_dies_after_five(exploding):
    row = RawEventFactory(event_type="exploding", payload={"type": "exploding"})
    now = timezone.now()
    delays = []
    for attempt in range(1, MAX_ATTEMPTS + 1):
        outcome = raw_event_consume(row.pk, now=now)
        row.refresh_from_db()
        assert row.attempts == attempt
        assert row.process_error == "RuntimeError: normalizer bug"
        assert row.processed_at is None
        if attempt < MAX_ATTEMPTS:
            assert outcome == row.state == RawEventState.RETRYING
            delays.append(row.next_attempt_at - now)
            # Not due yet: a second task for the row does nothing.
            assert raw_event_consume(row.pk, now=now + delays[-1] / 2) == "not_claimed"
            now = row.next_attempt_at
    assert delays == [timedelta(seconds=s) for s in (30, 60, 120, 240)]
    assert outcome == row.state == RawEventState.DEAD
    assert row.next_attempt_at is None
    assert len(exploding) == MAX_ATTEMPTS
    # Dead rows are not retried by anyone but an operator.
    assert raw_event_consume(row.pk, now=now + timedelta(days=1)) == "not_claimed"
    assert raw_events_drain(inline=True).selected == 0
    assert TraceEvent.objects.filter(raw_event=row, event="retry_scheduled").count() == 4
    assert TraceEvent.objects.filter(raw_event=row, event="dead").count() == 1


def test_the_drain_retries_rows_whose_backoff_is_over(exploding):
    row = RawEventFactory(event_type="exploding", payload={"type": "exploding"})
    raw_event_consume(row.pk)
    assert raw_events_drain(inline=True).selected == 0  # backoff not over
    RawEvent.objects.filter(pk=row.pk).update(next_attempt_at=timezone.now())
    assert raw_events_drain(inline=True).outcomes == {"retrying": 1}


def test_normalizer_writes_are_rolled_back_when_it_raises(monkeypatch, alice):
    def half_done(raw_event):
        DailySummary.objects.create(user=alice, source="x", date=timezone.now().date())
        raise ValueError("late failure")

    monkeypatch.setitem(registry._normalizers, "half", half_done)
    row = RawEventFactory(event_type="half", payload={"type": "half"})
    assert raw_event_consume(row.pk) == RawEventState.RETRYING
    assert not DailySummary.objects.exists()


def test_reconsuming_a_processed_row_is_a_no_op(post, fixture_payload, alice):
    post(fixture_payload("daily.json", reference="alice"))
    row = RawEvent.objects.get()
    before = (row.state, row.processed_at, row.attempts)
    assert consume_raw_event(row.pk) == {"not_claimed": 1}
    row.refresh_from_db()
    assert (row.state, row.processed_at, row.attempts) == before


def test_a_leased_row_is_not_claimed_twice(monkeypatch):
    seen = []

    def reentrant(raw_event):
        # While this row is being normalized, another consumer tries to take it.
        seen.append(raw_event_consume(raw_event.pk))
        return NormalizeResult(ok=True, rows=1)

    monkeypatch.setitem(registry._normalizers, "reentrant", reentrant)
    row = RawEventFactory(event_type="reentrant", payload={"type": "reentrant"})
    assert raw_event_consume(row.pk) == RawEventState.PROCESSED
    assert seen == ["not_claimed"]


def test_a_consumer_run_also_claims_other_pending_rows(monkeypatch):
    monkeypatch.setitem(registry._normalizers, "noop", lambda raw_event: NormalizeResult(ok=True))
    rows = [RawEventFactory(event_type="noop", payload={"type": "noop"}) for _ in range(14)]
    outcomes = consume_raw_event(rows[-1].pk)
    assert outcomes == {"processed": 11}
    assert RawEvent.objects.filter(state=RawEventState.PENDING).count() == 3
    # The oldest ones went first.
    assert set(
        RawEvent.objects.filter(state=RawEventState.PENDING).values_list("pk", flat=True)
    ) == {r.pk for r in rows[10:13]}


def test_batch_claims_skip_rows_leased_elsewhere(monkeypatch):
    monkeypatch.setitem(registry._normalizers, "noop", lambda raw_event: NormalizeResult(ok=True))
    leased = RawEventFactory(
        event_type="noop",
        payload={"type": "noop"},
        next_attempt_at=timezone.now() + timedelta(minutes=4),
    )
    free = RawEventFactory(event_type="noop", payload={"type": "noop"})
    assert raw_events_consume_batch(None) == {"processed": 1}
    leased.refresh_from_db()
    free.refresh_from_db()
    assert (leased.state, free.state) == (RawEventState.PENDING, RawEventState.PROCESSED)


def test_parked_result_keeps_its_error_and_clears_processed_at(monkeypatch):
    monkeypatch.setitem(
        registry._normalizers,
        "moody",
        lambda raw_event: NormalizeResult(ok=False, error="missing_field:x"),
    )
    row = RawEventFactory(event_type="moody", payload={"type": "moody"})
    assert raw_event_consume(row.pk) == RawEventState.PARKED
    row.refresh_from_db()
    assert (row.process_error, row.processed_at) == ("missing_field:x", None)


def test_one_deliverys_journey_is_one_query_by_request_id(post, fixture_payload, alice):
    post(fixture_payload("daily.json", reference="alice"), headers={"HTTP_X_REQUEST_ID": "r-42"})
    journey = list(
        TraceEvent.objects.filter(request_id="r-42").order_by("pk").values_list("event", flat=True)
    )
    # (django-q2's sync mode runs the task before publish returns: compare without order)
    assert sorted(journey) == ["consume_event", "normalized", "queue_published", "webhook_received"]
    normalized = TraceEvent.objects.get(event="normalized")
    assert normalized.user == alice and normalized.duration_ms is not None
    assert normalized.data["rows"] == 1


def test_a_batch_looks_its_users_up_in_one_query(alice, bob):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    rows = [
        RawEventFactory(reference_id=name, payload={"type": "daily", "data": []})
        for name in ("alice", "bob", "alice", "bob")
    ]
    with CaptureQueriesContext(connection) as queries:
        assert consume_raw_event(rows[0].pk) == {"processed": 4}
    user_queries = [q for q in queries if 'FROM "auth_user"' in q["sql"]]
    assert len(user_queries) == 1
    assert [r.user for r in RawEvent.objects.order_by("pk")] == [alice, bob, alice, bob]


def test_a_user_created_earlier_in_the_batch_is_found_by_later_rows(fixture_payload):
    # carol does not exist when the batch starts; the auth row creates her.
    auth = fixture_payload("auth.json", reference="carol", terra_user=TERRA_USER)
    daily = fixture_payload("daily.json", reference="carol", terra_user=TERRA_USER)
    first = RawEventFactory(event_type="auth", reference_id="carol", payload=auth)
    RawEventFactory(reference_id="carol", terra_user_id=TERRA_USER, payload=daily)
    assert consume_raw_event(first.pk) == {"processed": 2}
    assert {r.user.username for r in RawEvent.objects.all()} == {"carol"}


def test_a_lost_lease_writes_neither_the_outcome_nor_its_traces(monkeypatch):
    def taken_meanwhile(raw_event):
        # Our lease ran out mid-normalization and another consumer re-claimed the row.
        later = timezone.now() + timedelta(minutes=9)
        RawEvent.objects.filter(pk=raw_event.pk).update(next_attempt_at=later)
        return NormalizeResult(ok=True, rows=1)

    monkeypatch.setitem(registry._normalizers, "slow", taken_meanwhile)
    row = RawEventFactory(event_type="slow", payload={"type": "slow"})
    assert raw_event_consume(row.pk) == "not_claimed"
    row.refresh_from_db()
    assert row.state == RawEventState.PENDING
    assert not TraceEvent.objects.filter(raw_event=row).exists()
