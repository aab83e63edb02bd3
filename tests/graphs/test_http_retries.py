"""Outbound calls that are safe to retry, against a real stand-in server (tests/graphs/standin.py)
through graph runs on the harness: an Idempotency-Key per execution of a node (the same on
every retry, new for a loop's next visit or a restarted run, overridable per node), 429 and
503 retried after Retry-After (seconds or an HTTP date) when the node's timeout leaves room,
else by the node's backoff; a request timeout retried as before."""

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from graphs.errors import InvalidGraph
from tests.graphs.helpers import doc, node, parse
from tests.graphs.standin import answer
from tests.graphs.test_runs_harness import publish, start, status

RETRY = {"limit": 3, "delay": "1 second", "backoff": "constant"}


def notify_doc(url, *, action=None, timeout=None, transitions=(), extra_nodes=(), **node_extra):
    return doc(
        [
            node(
                "notify",
                "http",
                action={"url": url, "body": "/input", **(action or {})},
                output_mapping={"/response": ""},
                retries=RETRY,
                **({"timeout": timeout} if timeout else {}),
                **node_extra,
            ),
            *extra_nodes,
        ],
        list(transitions),
    )


def steps(harness, run) -> dict:
    return {s["name"]: s for s in harness.history("graph-run", run.run_id)["steps"]}


def test_every_retry_of_one_execution_sends_the_same_idempotency_key(harness, stand_in):
    clinic = stand_in(answer(500), answer(200, {"ok": True}))
    publish(notify_doc(clinic.url))
    run = start(harness, {"marker": "ldl"})
    harness.advance("1 second")
    assert status(harness, run)["status"] == "complete"
    assert len(clinic.calls) == 2 and clinic.keys[0] == clinic.keys[1]
    assert len(clinic.keys[0]) == 32 and clinic.calls[0].body == b'{"marker":"ldl"}'


def test_a_new_execution_sends_a_new_key_a_loop_visit_and_a_restarted_run(harness, stand_in):
    clinic = stand_in(answer(200, {"ok": True}))
    again = {"from": "notify", "to": "notify", "loop_config": {"max_iterations": 1}}
    publish(notify_doc(clinic.url, transitions=[again]))
    run = start(harness)
    assert len(clinic.calls) == 2 and len(set(clinic.keys)) == 2  # the loop's next visit
    harness.restart("graph-run", run.run_id)
    assert len(clinic.calls) == 4 and len(set(clinic.keys)) == 4  # a restarted run


def test_a_node_may_set_its_idempotency_key_from_its_input(harness, stand_in):
    clinic = stand_in(answer(503), answer(200, {}))
    publish(
        notify_doc(
            clinic.url,
            action={"idempotency_key": "lab-{upload}-notify"},
            input_mapping={"upload": "/input/upload_id"},
        )
    )
    start(harness, {"upload_id": "u-42"})
    harness.advance("1 second")
    assert clinic.keys == ["lab-u-42-notify", "lab-u-42-notify"]


def test_an_idempotency_key_template_must_use_the_nodes_input():
    with pytest.raises(InvalidGraph) as refused:
        parse(notify_doc("https://clinic.test/hook", action={"idempotency_key": "x-{nope}"}))
    assert refused.value.extra["field"] == "action.idempotency_key"


def test_a_429_with_retry_after_is_retried_after_that_delay(harness, stand_in):
    clinic = stand_in(answer(429, retry_after="1"), answer(200, {"ok": True}))
    publish(notify_doc(clinic.url))
    run = start(harness)
    final = status(harness, run)
    assert final["status"] == "complete" and final["output"]["response"] == {"ok": True}
    assert clinic.calls[1].at - clinic.calls[0].at >= 1.0
    assert clinic.keys[0] == clinic.keys[1]
    assert steps(harness, run)["0 notify"]["attempts"] == 1  # waited within the attempt


def test_a_503_with_an_http_date_retry_after_is_retried_at_that_time(harness, stand_in):
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=2), usegmt=True)
    clinic = stand_in(answer(503, retry_after=when), answer(200, {"ok": True}))
    publish(notify_doc(clinic.url))
    run = start(harness)
    assert status(harness, run)["status"] == "complete"
    assert len(clinic.calls) == 2 and clinic.calls[1].at - clinic.calls[0].at >= 0.5


def test_a_retry_after_beyond_the_nodes_timeout_falls_back_to_the_backoff(harness, stand_in):
    clinic = stand_in(answer(429, retry_after="3600"), answer(200, {"ok": True}))
    publish(notify_doc(clinic.url, timeout="5 seconds"))
    run = start(harness)
    assert len(clinic.calls) == 1 and status(harness, run)["status"] == "waiting"
    retrying = steps(harness, run)["0 notify"]
    assert retrying["status"] == "retrying" and retrying["error"]["name"] == "RateLimited"
    harness.advance("1 second")
    assert status(harness, run)["status"] == "complete" and len(clinic.calls) == 2


def test_a_429_without_retry_after_is_retried_by_the_backoff_not_failed(harness, stand_in):
    clinic = stand_in(answer(429), answer(200, {"ok": True}))
    publish(notify_doc(clinic.url))
    run = start(harness)
    harness.advance("1 second")
    assert status(harness, run)["status"] == "complete"
    assert steps(harness, run)["0 notify"]["attempts"] == 2


def test_a_call_that_times_out_once_is_retried_with_the_same_key(harness, stand_in):
    clinic = stand_in(answer(200, {"late": True}, delay=2.0), answer(200, {"ok": True}))
    publish(notify_doc(clinic.url, action={"timeout": "1 second"}))
    run = start(harness)
    harness.advance("1 second")
    final = status(harness, run)
    assert final["status"] == "complete" and final["output"]["response"] == {"ok": True}
    assert len(clinic.calls) == 2 and clinic.keys[0] == clinic.keys[1]
    assert steps(harness, run)["0 notify"]["attempts"] == 2


def test_calls_to_one_host_are_paced_across_runs(harness, stand_in, settings):
    # Seen: no outbound pacing; a burst of runs called the clinic as fast as they could.
    settings.GRAPHS_HTTP_RATE_PER_HOST = 5
    clinic = stand_in(answer(200, {"ok": True}))
    publish(notify_doc(clinic.url))
    for n in range(12):
        start(harness, {"marker": f"m{n}"})
    times = sorted(call.at for call in clinic.calls)
    assert len(times) == 12
    busiest = max(sum(1 for t in times if begin <= t < begin + 1.0) for begin in times)
    assert busiest <= 6  # 5 a second, the first slot at once
