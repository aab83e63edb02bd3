"""Pure decisions and durations: no database, no clock."""

import math
from datetime import UTC, datetime, timedelta

import pytest

from workflows import decisions, durations
from workflows.decisions import StepState
from workflows.errors import InstanceTerminal, InvalidDuration, InvalidStep

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "ms"),
    [
        (1500, 1500),
        (timedelta(minutes=2), 120_000),
        ("30 seconds", 30_000),
        ("1 second", 1000),
        ("1 hour", 3_600_000),
        ("2 days", 172_800_000),
        ("1.5 minutes", 90_000),
        ("250 milliseconds", 250),
        ("1 week", 604_800_000),
    ],
)
def test_durations_accept_ms_timedeltas_and_strings(value, ms):
    assert durations.to_ms(value) == ms


@pytest.mark.parametrize("value", ["soon", "3 fortnights", -1, True, None, math.inf, "1"])
def test_bad_durations_are_clear_errors(value):
    with pytest.raises(InvalidDuration):
        durations.to_ms(value)


def test_default_policy_is_five_retries_ten_seconds_exponential():
    policy = decisions.retry_policy(None)
    assert (policy.limit, policy.delay_ms, policy.backoff) == (5, 10_000, "exponential")
    assert [decisions.retry_delay_ms(policy, n) for n in (1, 2, 3, 4)] == [
        10_000,
        20_000,
        40_000,
        80_000,
    ]


@pytest.mark.parametrize(
    ("backoff", "delays"),
    [("constant", [2000, 2000, 2000]), ("linear", [2000, 4000, 5000])],
)
def test_constant_and_linear_backoff_with_max_delay(backoff, delays):
    policy = decisions.retry_policy(
        {"limit": 3, "delay": "2 seconds", "backoff": backoff, "max_delay": 5000}
    )
    assert [decisions.retry_delay_ms(policy, n) for n in (1, 2, 3)] == delays


def test_after_failure_retries_until_the_limit_and_never_for_non_retryable():
    policy = decisions.retry_policy({"limit": 2, "delay": 1000})
    assert decisions.after_failure(policy, attempt=1, now=NOW, non_retryable=False) == (
        decisions.RetryAt(NOW + timedelta(seconds=1))
    )
    assert isinstance(
        decisions.after_failure(policy, attempt=3, now=NOW, non_retryable=False),
        decisions.GiveUp,
    )
    assert isinstance(
        decisions.after_failure(policy, attempt=1, now=NOW, non_retryable=True), decisions.GiveUp
    )
    forever = decisions.retry_policy({"limit": math.inf})
    assert isinstance(
        decisions.after_failure(forever, attempt=10_000, now=NOW, non_retryable=False),
        decisions.RetryAt,
    )


@pytest.mark.parametrize(
    "raw", [{"limit": -1}, {"backoff": "random"}, {"typo": 1}, "5", {"limit": "5"}]
)
def test_bad_retry_options_are_clear_errors(raw):
    with pytest.raises((InvalidStep, InvalidDuration)):
        decisions.retry_policy(raw)


def step(**kw) -> StepState:
    return StepState(name="s", type="do", **kw)


def test_do_action_replays_retries_and_resumes_interrupted_attempts():
    assert decisions.do_action(None, NOW) == decisions.StartAttempt(1)
    assert decisions.do_action(step(status="complete", result=7), NOW) == (
        decisions.ReturnCached(7)
    )
    err = {"name": "KeyError", "message": "x"}
    assert decisions.do_action(step(status="errored", error=err), NOW) == (
        decisions.RaiseCached(err)
    )
    later = NOW + timedelta(seconds=5)
    pending = step(status="retrying", attempts=1, next_retry_at=later, max_attempts=6)
    assert decisions.do_action(pending, NOW) == decisions.SuspendUntil(later)
    assert decisions.do_action(pending, later) == decisions.StartAttempt(2)
    crashed = step(status="running", attempts=2, max_attempts=6)
    assert decisions.do_action(crashed, NOW) == decisions.StartAttempt(3)
    last = step(status="running", attempts=6, max_attempts=6)
    assert decisions.do_action(last, NOW).error["name"] == "StepInterrupted"


def test_wait_timeouts_are_bounded():
    assert decisions.wait_timeout_ms("24 hours") == 86_400_000
    for bad in (999, "366 days"):
        with pytest.raises(InvalidStep):
            decisions.wait_timeout_ms(bad)


def test_boundary_permission_and_lifecycle_rules():
    assert decisions.boundary_permission("active") == decisions.PROCEED
    assert decisions.boundary_permission("paused") == decisions.KEEP_AND_STOP
    assert decisions.boundary_permission("terminated") == decisions.DISCARD
    assert decisions.check_pausable("waiting") is True
    assert decisions.check_pausable("paused") is False
    assert decisions.resume_applies("paused") and not decisions.resume_applies("active")
    for status in ("complete", "errored", "terminated"):
        for check in (
            decisions.check_pausable,
            decisions.check_terminable,
            decisions.check_event_accepted,
        ):
            with pytest.raises(InstanceTerminal):
                check(status)


def test_replay_divergence_names_the_first_recorded_step_not_asked_for_yet():
    recorded = ["a", "b", "c"]
    assert decisions.replay_divergence(recorded, {"a"}, "b") is None  # recorded: cached
    assert decisions.replay_divergence(recorded, {"a"}, "b2") == "b"  # renamed
    assert decisions.replay_divergence(recorded, {"a", "c"}, "d") == "b"  # b removed
    assert decisions.replay_divergence(recorded, {"a", "b", "c"}, "d") is None  # appended
    assert decisions.replay_divergence([], set(), "a") is None  # a fresh run


def test_replay_divergence_is_judged_within_a_branch_or_iteration_scope():
    recorded = ["fetch/left/call", "fetch/right/call", "poll/~1/get", "poll/~2/get", "done"]
    # New top-level work after a parallel whose replay returns its stored result: fine.
    assert decisions.replay_divergence(recorded, {"done"}, "next") is None
    # A loop resumed from stored state starts iteration 3 without replaying 1 and 2.
    assert decisions.replay_divergence(recorded, set(), "poll/~3/get") is None
    # Within one branch, the recorded order still holds.
    assert decisions.replay_divergence(recorded, set(), "fetch/left/call-v2") == "fetch/left/call"
    assert decisions.replay_divergence(recorded, set(), "fetch/right/other") == "fetch/right/call"
    assert decisions.replay_divergence(recorded, {"done"}, "poll/~2/put") == "poll/~2/get"
    assert decisions.location_scope("fetch/left/call") == "fetch/left"
    assert decisions.location_scope("done") == ""
