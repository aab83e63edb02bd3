"""Big deliveries are parsed as a stream that keeps only what their normalizer reads:
the rows they write are the ones the whole parse writes, their memory is a fraction of
the body's, and what cannot be parsed is classified as before."""

import copy
import json
import tracemalloc
from datetime import date

import pytest

from demo import payloads as demo_payloads
from ingest.consumer import raw_event_consume, raw_events_consume_pending
from ingest.models import Activity, DailySummary, RawEvent, RawEventState, SleepSession, TraceEvent
from ingest.normalizers.daily import DAILY_READS
from ingest.store.consumer import INLINE_BODY_BYTES
from ingest.terra.projection import payload_projected, payload_trie, reads_trie
from labs.models import Biomarker
from tests.conftest import load_fixture
from tests.factories import RawEventFactory

pytestmark = pytest.mark.django_db

DAY = date(2026, 6, 1)
ORDERED = {"HTTP_X_TERRA_ORDERING_TIMESTAMP": "1780300000000"}
SAMPLE = {"timestamp": "2026-06-01T00:00:00.000000+01:00", "bpm": 64}
TABLES = (DailySummary, SleepSession, Activity, Biomarker)
NOT_COMPARED = {"id", "user_id", "created_at", "updated_at", "raw"}
# One item per type with every field of Terra's OpenAPI schema (tests/ingest/make_maximal_items.py).
MAXIMAL = load_fixture("maximal_items.json")


def for_user(payload: dict, username: str) -> dict:
    """The same data (demo payloads differ per username: build once, then re-address it)."""
    payload = copy.deepcopy(payload)
    payload["user"]["reference_id"] = username
    payload["user"]["user_id"] = demo_payloads.terra_user_id_for(username)
    return payload


def padded(payload: dict, samples: int = 20_000, *, check: bool = True) -> dict:
    """Past INLINE_BODY_BYTES with a sample stream no normalizer reads, where Terra puts one."""
    payload = copy.deepcopy(payload)
    item = payload["data"][0]
    item.setdefault("heart_rate_data", {})["detailed"] = {"hr_samples": [SAMPLE] * samples}
    assert not check or len(json.dumps(payload).encode()) > INLINE_BODY_BYTES
    return payload


def typed_rows(user) -> dict:
    return {
        model.__name__: [
            {key: value for key, value in row.items() if key not in NOT_COMPARED}
            for row in model.objects.filter(user=user).order_by("pk").values()
        ]
        for model in TABLES
    }


def outcome(username: str) -> tuple[RawEvent, dict]:
    row = RawEvent.objects.get(reference_id=username)
    trace = TraceEvent.objects.get(raw_event=row, event__in=["normalized", "skipped", "parked"])
    return row, trace.data


def with_glucose(payload: dict) -> dict:
    payload = copy.deepcopy(payload)
    payload["data"][0]["glucose_data"] = {
        "blood_glucose_samples": [{"timestamp": "2026-06-01T08:00:00+01:00", "value": 5.4}] * 5,
        "detailed_blood_glucose_samples": [{"value": 5.1}] * 3,
    }
    return payload


def delivery(data_type: str, items: str) -> dict:
    data = demo_payloads.data_payload(data_type, "alice", DAY)
    if items == "maximal":
        # every field of Terra's schema filled in: a read path left out changes a value
        data["data"] = [MAXIMAL[data_type]]
    elif data_type == "body":
        data = with_glucose(data)
    return data


@pytest.mark.parametrize("items", ["demo", "maximal"])
@pytest.mark.parametrize("data_type", ["daily", "sleep", "activity", "body"])
def test_a_big_delivery_writes_the_rows_its_data_parsed_whole_writes(
    post, alice, bob, data_type, items
):
    data = delivery(data_type, items)
    post(data, headers=ORDERED)
    post(padded(for_user(data, "bob")), headers=ORDERED)

    whole, whole_trace = outcome("alice")
    big, big_trace = outcome("bob")
    assert whole.state == big.state == RawEventState.PROCESSED
    assert "stream_parsed" not in whole_trace
    assert big_trace.pop("stream_parsed") is True
    assert big_trace == whole_trace
    expected = typed_rows(alice)
    assert any(expected.values())
    assert typed_rows(bob) == expected


def test_glucose_streams_of_a_big_body_delivery_are_counted_without_being_kept(post, bob):
    payload = demo_payloads.body_payload("bob", DAY)
    payload["data"] = [{"metadata": payload["data"][0]["metadata"]}]
    post(padded(with_glucose(payload)))
    row, trace = outcome("bob")
    assert (row.state, row.process_error) == (RawEventState.SKIPPED, "skipped:glucose_only:8")
    assert trace["stream_parsed"] is True


def test_the_raw_of_a_big_deliverys_rows_holds_only_the_fields_read(post, bob):
    sleep = padded(demo_payloads.sleep_payload("bob", DAY))
    activity = padded(demo_payloads.activity_payload("bob", DAY))
    post(sleep)
    post(activity)
    for model, payload in ((SleepSession, sleep), (Activity, activity)):
        raw = model.objects.get().raw
        assert "detailed" not in raw["heart_rate_data"]
        assert raw["metadata"] == payload["data"][0]["metadata"]
    # the exact body stays in raw_events
    stored = RawEvent.objects.filter(event_type="sleep").get()
    assert (
        len(json.loads(bytes(stored.body))["data"][0]["heart_rate_data"]["detailed"]["hr_samples"])
        == 20_000
    )


def test_a_body_left_out_of_a_batch_claim_but_under_the_threshold_is_parsed_whole(bob):
    # A 100-row batch claim leaves out bodies over ~84 KB; only those over 1 MiB are streamed.
    payload = padded(demo_payloads.sleep_payload("bob", DAY), samples=3_000, check=False)
    row = RawEventFactory(event_type="sleep", reference_id="bob", payload=payload)
    assert 100 * 1024 < len(row.body) <= INLINE_BODY_BYTES
    assert raw_events_consume_pending(batch=100) == {RawEventState.PROCESSED: 1}
    assert "stream_parsed" not in outcome("bob")[1]
    assert len(SleepSession.objects.get().raw["heart_rate_data"]["detailed"]["hr_samples"]) == 3_000


def test_numbers_beyond_float_range_in_and_outside_data_never_break_a_big_row(post, alice, bob):
    data = demo_payloads.daily_payload("alice", DAY)
    data["data"][0]["distance_data"]["steps"] = "STEPS"
    data["extra"] = "EXTRA"
    for payload in (data, padded(for_user(data, "bob"))):
        body = json.dumps(payload).replace('"STEPS"', "1e400").replace('"EXTRA"', "1e400")
        post(body.encode(), headers=ORDERED)
    whole, _ = outcome("alice")
    big, trace = outcome("bob")
    assert whole.state == big.state == RawEventState.PROCESSED
    assert trace["stream_parsed"] is True
    assert DailySummary.objects.get(user=bob).steps is None
    assert typed_rows(bob) == typed_rows(alice)


def test_a_sleep_reading_beyond_float_range_is_kept_as_text_in_raw(post, bob):
    payload = padded(demo_payloads.sleep_payload("bob", DAY))
    payload["data"][0]["temperature_data"]["delta"] = "DELTA"
    post(json.dumps(payload).replace('"DELTA"', "1e400").encode())
    session = SleepSession.objects.get()
    assert session.skin_temperature is None
    assert session.raw["temperature_data"]["delta"] == "1E+400"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"[" + b"1," * 600_000 + b"1]", "not_an_object"),
        (b'{"type":"daily","data":[' + b"1," * 600_000 + b"NaN]}", "nan_or_infinity"),
        (b'{"type":"daily","data":[' + b"1," * 600_000 + b"1]", "invalid_json"),
    ],
)
def test_a_big_body_that_is_not_a_json_object_is_still_skipped_unparseable(body, reason):
    assert len(body) > INLINE_BODY_BYTES
    row = RawEventFactory(event_type="daily", reference_id="bob")
    RawEvent.objects.filter(pk=row.pk).update(body=body)
    assert raw_event_consume(row.pk) == RawEventState.SKIPPED
    row.refresh_from_db()
    assert row.process_error == f"skipped:unparseable:{reason}"


def _allocated_peak(parse, body: bytes) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = parse(body)
        peak = tracemalloc.get_traced_memory()[1] - before
        del result
    finally:
        tracemalloc.stop()
    return peak


def test_streaming_a_big_body_allocates_a_fraction_of_what_the_whole_parse_does():
    payload = padded(demo_payloads.daily_payload("bob", DAY), samples=380_000)
    body = json.dumps(payload, separators=(",", ":")).encode()
    assert len(body) > 20 * 1024 * 1024
    trie = payload_trie(reads_trie(DAILY_READS))

    streamed = _allocated_peak(lambda b: payload_projected(b, trie), body)
    whole = _allocated_peak(json.loads, body)

    assert streamed < len(body) / 4
    assert whole > 2 * len(body)


def test_read_paths_build_one_trie():
    trie = reads_trie(["a.b", "a.c[].d", "a.c[].e", "n.#count", "m", "m.x"])
    assert payload_projected(
        b'{"data":[{"a":{"b":{"deep":1},"c":[{"d":1,"e":2,"f":3},7,[8]],"z":0},'
        b'"n":[1,[2],{"3":3}],"m":{"x":1,"y":2},"q":[1]},"x",[1],{}],"top":{"k":[1]}}',
        payload_trie(trie),
    ) == {
        "data": [
            {
                "a": {"b": {"deep": 1}, "c": [{"d": 1, "e": 2}, 7, []]},
                "n": [None] * 3,
                "m": {"x": 1, "y": 2},
            },
            "x",
            [],
            {},
        ],
        "top": {"k": [1]},
    }
