"""step.do through the harness: caching, replay, retries, timeouts, limits, tx.mutate, logs."""

import math
import time

import pytest
from django.contrib.auth.models import Group

from workflows import NonRetryableError, workflow

CALLS: dict[str, int] = {}


def count(key: str) -> int:
    CALLS[key] = CALLS.get(key, 0) + 1
    return CALLS[key]


@pytest.fixture(autouse=True)
def _reset_calls():
    CALLS.clear()


@workflow(name="t-cache")
def cache_wf(event, step):
    a = step.do("a", lambda: count("a") and {"n": (1, 2)})
    again = step.do("a", lambda: count("a-again"))
    step.sleep("pause", "1 minute")
    b = step.do("b", lambda: count("b"))
    return {"a": a, "again": again, "b": b}


def test_step_results_are_cached_and_replayed_without_calling_the_callback(harness):
    harness.create("t-cache", id="c1")
    assert harness.status("t-cache", "c1")["status"] == "waiting"
    harness.advance("1 minute")
    assert harness.status("t-cache", "c1") == {
        "status": "complete",
        "output": {"a": {"n": [1, 2]}, "again": {"n": [1, 2]}, "b": 1},
    }
    assert CALLS == {"a": 1, "b": 1}  # a second step.do with the same name reuses the result


@workflow(name="t-retry-default")
def retry_default(event, step):
    def flaky():
        if count("flaky") < 3:
            raise ValueError("not yet")
        return "ok"

    return step.do("flaky", flaky)


def test_default_retries_back_off_exponentially_from_ten_seconds(harness):
    harness.create("t-retry-default", id="r")
    steps = harness.history("t-retry-default", "r")["steps"]
    assert steps[0]["status"] == "retrying" and steps[0]["attempts"] == 1
    assert (steps[0]["next_retry_at"] - harness.now()).total_seconds() == 10
    harness.advance("9 seconds")
    assert CALLS["flaky"] == 1
    harness.advance("1 second")
    assert CALLS["flaky"] == 2
    steps = harness.history("t-retry-default", "r")["steps"]
    assert (steps[0]["next_retry_at"] - harness.now()).total_seconds() == 20  # 10 · 2^(2−1)
    harness.advance("20 seconds")
    assert harness.status("t-retry-default", "r") == {"status": "complete", "output": "ok"}
    assert harness.history("t-retry-default", "r")["steps"][0]["attempts"] == 3


@workflow(name="t-retry-exhausted")
def retry_exhausted(event, step):
    return step.do(
        "always",
        lambda: count("always") and (_ for _ in ()).throw(KeyError("nope")),
        retries={"limit": 2, "delay": "1 second", "backoff": "constant"},
    )


def test_when_retries_run_out_the_instance_errors_with_the_last_error(harness):
    harness.create("t-retry-exhausted", id="x")
    harness.advance("1 second")
    harness.advance("1 second")
    assert CALLS["always"] == 3  # 1 attempt + 2 retries
    assert harness.status("t-retry-exhausted", "x") == {
        "status": "errored",
        "error": {"name": "KeyError", "message": "'nope'"},
    }
    logs = harness.history("t-retry-exhausted", "x")["logs"]
    assert any("failed after 3 attempt(s)" in line["message"] for line in logs)
    assert all(line["category"] == "system" for line in logs)


@workflow(name="t-linear")
def linear(event, step):
    def fail():
        count("linear")
        raise RuntimeError("again")

    return step.do(
        "s",
        fail,
        retries={"limit": math.inf, "delay": 1000, "backoff": "linear", "max_delay": "3 seconds"},
    )


def test_linear_backoff_is_capped_by_max_delay_and_infinite_limit_keeps_trying(harness):
    harness.create("t-linear", id="l")
    gaps = []
    for _ in range(5):
        step = harness.history("t-linear", "l")["steps"][0]
        gap = (step["next_retry_at"] - harness.now()).total_seconds()
        gaps.append(gap)
        harness.advance(int(gap * 1000))
    assert gaps == [1, 2, 3, 3, 3]
    assert harness.status("t-linear", "l")["status"] == "waiting"
    assert CALLS["linear"] == 6


@workflow(name="t-nonretryable")
def nonretryable(event, step):
    def fail():
        count("nr")
        raise NonRetryableError("bad input")

    return step.do("s", fail)


def test_non_retryable_error_fails_the_instance_at_once(harness):
    harness.create("t-nonretryable", id="n")
    assert CALLS["nr"] == 1
    assert harness.status("t-nonretryable", "n") == {
        "status": "errored",
        "error": {"name": "NonRetryableError", "message": "bad input"},
    }


@workflow(name="t-caught")
def caught(event, step):
    try:
        step.do("s", lambda: (_ for _ in ()).throw(NonRetryableError("x")))
    except Exception as exc:  # a failed step may be handled; suspension could not be swallowed
        step.sleep("nap", "5 seconds")
        return f"handled {type(exc).__name__}"


def test_workflow_code_can_catch_a_failed_step_but_not_a_suspension(harness):
    harness.create("t-caught", id="c")
    assert harness.status("t-caught", "c")["status"] == "waiting"
    harness.advance("5 seconds")
    # On replay the failed step re-raises from storage with the original error name.
    assert harness.status("t-caught", "c") == {
        "status": "complete",
        "output": "handled StepFailed",
    }


@workflow(name="t-timeout")
def timeout_wf(event, step):
    def slow():
        count("slow")
        time.sleep(0.15)
        return "late"

    return step.do("slow", slow, timeout=50, retries={"limit": 1, "delay": 0})


def test_an_attempt_past_its_timeout_fails_and_its_late_result_is_discarded(harness):
    harness.create("t-timeout", id="t")
    assert CALLS["slow"] == 2
    status = harness.status("t-timeout", "t")
    assert status["status"] == "errored"
    assert status["error"]["name"] == "StepTimeout"
    assert harness.history("t-timeout", "t")["steps"][0]["result"] is None


@workflow(name="t-big")
def big(event, step):
    return step.do("big", lambda: "x" * (1024 * 1024 + 1))


def test_results_over_one_mib_fail_the_step_without_retries(harness):
    harness.create("t-big", id="b")
    status = harness.status("t-big", "b")
    assert status["status"] == "errored"
    assert "1 MiB" in status["error"]["message"]


@workflow(name="t-unserializable")
def unserializable(event, step):
    return step.do("obj", lambda: object())


def test_non_json_results_fail_clearly(harness):
    harness.create("t-unserializable", id="u")
    assert "not JSON-serializable" in harness.status("t-unserializable", "u")["error"]["message"]


@workflow(name="t-long-name")
def long_name(event, step):
    return step.do("n" * 257, lambda: 1)


def test_step_names_over_256_chars_are_a_clear_error(harness):
    harness.create("t-long-name", id="n")
    assert harness.status("t-long-name", "n")["error"]["name"] == "InvalidStep"


@workflow(name="t-many")
def many(event, step):
    for i in range(1025):
        step.do(f"s{i}", lambda: None)
    return "never"


def test_more_than_1024_steps_in_a_run_is_a_clear_error(harness):
    harness.create("t-many", id="m")
    status = harness.status("t-many", "m")
    assert status["status"] == "errored"
    assert "1024" in status["error"]["message"]


@workflow(name="t-sleeps-dont-count")
def sleeps_dont_count(event, step):
    for i in range(1100):
        step.sleep(f"z{i}", 0)
    return "ok"


def test_sleeps_do_not_count_towards_the_step_limit(harness):
    harness.create("t-sleeps-dont-count", id="z")
    assert harness.status("t-sleeps-dont-count", "z")["status"] == "complete"


@workflow(name="t-mutate")
def mutate(event, step):
    def create_group():
        attempt = count("mutate")
        step.tx.mutate(lambda: Group.objects.create(name=f"g-{attempt}"))
        if attempt == 1:
            raise RuntimeError("first attempt fails after registering a write")
        return attempt

    first = step.do("create", create_group, retries={"limit": 3, "delay": 0})
    step.sleep("later", "1 second")
    return first


def test_tx_mutate_runs_only_for_the_successful_attempt_and_never_on_replay(harness):
    harness.create("t-mutate", id="m")
    harness.advance("1 second")
    assert harness.status("t-mutate", "m") == {"status": "complete", "output": 2}
    assert list(Group.objects.values_list("name", flat=True)) == ["g-2"]


@workflow(name="t-mutate-conflict")
def mutate_conflict(event, step):
    def dup():
        count("dup")
        step.tx.mutate(lambda: Group.objects.create(name="taken"))
        return "stored?"

    return step.do("dup", dup, retries={"limit": 5, "delay": 0})


def test_integrity_error_in_mutate_is_a_non_retryable_step_failure(harness):
    Group.objects.create(name="taken")
    harness.create("t-mutate-conflict", id="d")
    assert CALLS["dup"] == 1
    status = harness.status("t-mutate-conflict", "d")
    assert status["status"] == "errored"
    assert status["error"]["name"] == "IntegrityError"
    step = harness.history("t-mutate-conflict", "d")["steps"][0]
    assert step["status"] == "errored" and step["result"] is None


@workflow(name="t-logs")
def logs_wf(event, step):
    step.log.info("before", {"k": 1})

    def work():
        step.log.warn("inside")
        return 1

    step.do("work", work)
    step.sleep("nap", "1 second")
    step.log.error("after", category="custom")
    return 1


def test_logs_carry_step_attempt_and_replay_flag(harness):
    harness.create("t-logs", id="l")
    harness.advance("1 second")
    lines = [
        (x["level"], x["category"], x["message"], x["step_name"], x["attempt"], x["is_replay"])
        for x in harness.history("t-logs", "l")["logs"]
        if x["category"] != "system"
    ]
    assert lines == [
        ("info", "workflow", "before", "", None, False),
        ("warn", "workflow", "inside", "work", 1, False),
        ("info", "workflow", "before", "", None, True),  # replayed after the sleep
        ("error", "custom", "after", "", None, False),
    ]
    assert harness.history("t-logs", "l")["logs"][1]["data"] == {"k": 1}


@workflow(name="t-log-system")
def log_system(event, step):
    step.log.info("pretend", category="system")


@workflow(name="t-log-long")
def log_long(event, step):
    step.log.info("x" * 2049)


def test_system_log_category_is_reserved_and_long_messages_are_refused(harness):
    harness.create("t-log-system", id="s")
    harness.create("t-log-long", id="l")
    assert "reserved" in harness.status("t-log-system", "s")["error"]["message"]
    assert "2048" in harness.status("t-log-long", "l")["error"]["message"]
