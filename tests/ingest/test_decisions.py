"""The consumer's rules as pure decisions: no database, no clock."""

from datetime import UTC, datetime, timedelta

from ingest import decisions
from ingest.decisions import MAX_ATTEMPTS, NO_CONNECTION

NOW = datetime(2026, 7, 1, 12, 0, tzinfo=UTC)


def test_retries_back_off_exponentially_from_thirty_seconds():
    assert [decisions.backoff(n).total_seconds() for n in (1, 2, 3, 4)] == [30, 60, 120, 240]


def test_parked_rows_wait_half_their_age_within_thirty_seconds_and_an_hour():
    assert decisions.park_backoff(timedelta(seconds=10)) == timedelta(seconds=30)
    assert decisions.park_backoff(timedelta(minutes=20)) == timedelta(minutes=10)
    assert decisions.park_backoff(timedelta(hours=5)) == timedelta(hours=1)


def test_a_row_waiting_for_its_connection_or_older_than_a_day_is_not_tried_again_by_time():
    young = NOW - timedelta(minutes=10)
    assert decisions.parked_until(NO_CONNECTION, received_at=young, now=NOW) is None
    old = NOW - timedelta(hours=25)
    assert decisions.parked_until("upstream_not_ready", received_at=old, now=NOW) is None
    again = decisions.parked_until("upstream_not_ready", received_at=young, now=NOW)
    assert again == NOW + timedelta(minutes=5)


def test_a_normalizer_s_answer_decides_processed_skipped_or_parked():
    common = {"attempts": 2, "received_at": NOW - timedelta(minutes=10), "now": NOW}
    done = decisions.outcome_of_result(ok=True, skipped=None, error=None, **common)
    assert (done.state, done.processed_at, done.attempts, done.trace) == (
        "processed",
        NOW,
        2,
        "normalized",
    )
    skipped = decisions.outcome_of_result(ok=True, skipped="athlete", error=None, **common)
    assert (skipped.state, skipped.process_error) == ("skipped", "skipped:athlete")
    parked = decisions.outcome_of_result(ok=False, skipped=None, error="why", **common)
    assert (parked.state, parked.attempts, parked.next_attempt_at) == (
        "parked",
        0,
        NOW + timedelta(minutes=5),
    )


def test_a_deterministic_error_parks_on_the_backoff_and_resets_the_count():
    outcome = decisions.outcome_of_failure(
        error="steps out of range",
        deterministic=True,
        attempts=4,
        received_at=NOW - timedelta(minutes=10),
        now=NOW,
    )
    assert outcome.state == "parked" and outcome.attempts == 0
    assert outcome.process_error == "value_out_of_range: steps out of range"
    assert outcome.next_attempt_at == NOW + timedelta(minutes=5)


def test_an_error_is_retried_until_the_last_attempt_then_dead():
    received = NOW - timedelta(minutes=1)
    retry = decisions.outcome_of_failure(
        error="boom", deterministic=False, attempts=2, received_at=received, now=NOW
    )
    assert (retry.state, retry.next_attempt_at) == ("retrying", NOW + timedelta(minutes=1))
    dead = decisions.outcome_of_failure(
        error="boom", deterministic=False, attempts=MAX_ATTEMPTS, received_at=received, now=NOW
    )
    assert (dead.state, dead.next_attempt_at, dead.process_error) == ("dead", None, "boom")


def test_a_dead_letter_keeps_the_last_real_error_and_blames_the_worker_only_without_one():
    kept = decisions.outcome_of_abandoned(attempts=6, last_error="RuntimeError: boom")
    assert kept.state == "dead" and kept.process_error.startswith("RuntimeError: boom")
    crash = decisions.outcome_of_abandoned(attempts=6, last_error=None)
    assert crash.process_error == decisions.ABANDONED


def test_a_claim_past_the_last_attempt_is_abandoned_and_a_reclaimed_pending_row_runs_alone():
    assert not decisions.is_abandoned(MAX_ATTEMPTS)
    assert decisions.is_abandoned(MAX_ATTEMPTS + 1)
    assert decisions.was_recovered("pending", 2) and not decisions.was_recovered("pending", 1)
    assert not decisions.was_recovered("retrying", 3)
