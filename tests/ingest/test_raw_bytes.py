"""Nothing signed is lost: every accepted delivery keeps its exact bytes, a signed
body that is not a JSON object is stored and acknowledged as skipped:unparseable:<reason>, and
numbers beyond float range never break a row or the operator's views."""

import hashlib
import json

import pytest

from ingest.models import RawEvent, RawEventState
from tests.conftest import load_fixture


@pytest.mark.django_db
def test_the_stored_body_is_the_exact_bytes_received(deliver):
    # Seen: the payload column held re-serialized JSON, so no row could be checked against its
    # sha256. Odd spacing, key order and escapes must all survive.
    raw = b'{ "type":"daily" ,"user":{"user_id":"u1"},  "data":[], "z":"\\u00e9", "a":1.50}\n'
    assert deliver(raw).status_code == 200
    row = RawEvent.objects.get()
    assert bytes(row.body) == raw
    assert hashlib.sha256(bytes(row.body)).hexdigest() == row.dedup_key
    assert row.payload["z"] == "é"


@pytest.mark.django_db
def test_a_big_streamed_body_is_stored_byte_for_byte(deliver, monkeypatch):
    from ingest.store import deliveries

    monkeypatch.setattr(deliveries, "STAGE_ABOVE_BYTES", 64)  # PostgreSQL: COPY in chunks
    payload = load_fixture("sleep.json")
    payload["note"] = "é" * 3000
    raw = json.dumps(payload, ensure_ascii=False, indent=1).encode()
    assert deliver(raw).status_code == 200
    row = RawEvent.objects.get()
    assert (
        hashlib.sha256(bytes(row.body)).hexdigest()
        == row.dedup_key
        == (hashlib.sha256(raw).hexdigest())
    )


UNPARSEABLE = [
    (b"", "empty"),
    (b"  \n", "empty"),
    (b"\xff\xfe{}", "invalid_utf8"),
    (b'{"type": "daily", "x": "\xc3"}', "invalid_utf8"),
    (b"{not json", "invalid_json"),
    (b"[]", "not_an_object"),
    (b"[1, 2]", "not_an_object"),
    (b'"text"', "not_an_object"),
    (b"null", "not_an_object"),
    (b"1e400", "not_an_object"),
    (b'{"type": "daily", "steps": NaN}', "nan_or_infinity"),
    (b'{"type": "daily", "steps": -Infinity}', "nan_or_infinity"),
    (b"[" * 100_000, "too_deep"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("raw", "reason"), UNPARSEABLE)
def test_a_signed_body_that_is_not_a_json_object_is_stored_and_acknowledged(
    post, raw, reason, operator_api
):
    # Seen: 400 and nothing stored (Terra does not retry a 4xx: the delivery was lost); on
    # SQLite NaN gave a 500.
    response = post(raw)
    assert response.status_code == 200
    assert response.json()["skipped"] == f"unparseable:{reason}"
    row = RawEvent.objects.get()
    assert bytes(row.body) == raw
    assert hashlib.sha256(raw).hexdigest() == row.dedup_key
    assert row.state == RawEventState.SKIPPED
    assert row.process_error == f"skipped:unparseable:{reason}"
    assert row.processed_at is not None
    # The operator sees it, and its detail view renders.
    api = operator_api("ingest:admin")
    detail = api.get(f"/v1/admin/raw-events/{row.pk}")
    assert detail.status_code == 200
    assert detail.json()["payload"] is None
    # A second identical delivery is a duplicate, as for any other body.
    assert post(raw).json() == {"ok": True, "duplicate": True}


@pytest.mark.django_db
def test_a_replayed_unparseable_row_ends_skipped_again(post, django_capture_on_commit_callbacks):
    from ingest.replay import raw_events_replay

    post(b"[]")
    row = RawEvent.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        raw_events_replay(ids=[row.pk])
    row.refresh_from_db()
    assert (row.state, row.process_error) == ("skipped", "skipped:unparseable:not_an_object")


BIG_NUMBERS = (
    b'{"type": "daily", "user": {"user_id": "u1"}, "data": [{"steps": 1e400, "x": -2e999}]}'
)


@pytest.mark.django_db
def test_numbers_beyond_float_range_never_break_a_row_or_the_views(
    post, operator_api, admin_client
):
    # Seen: 500 on SQLite in the operator's raw-event view (inf is not JSON).
    response = post(BIG_NUMBERS)
    assert response.status_code == 200
    row = RawEvent.objects.get()
    assert row.state != RawEventState.RETRYING
    assert row.payload["data"][0]["steps"] == "1e400"  # kept as its literal, not inf
    api = operator_api("ingest:admin")
    assert api.get(f"/v1/admin/raw-events/{row.pk}").status_code == 200
    assert api.get("/v1/admin/dlq").status_code == 200
    assert admin_client.get("/admin/ingest/rawevent/").status_code == 200
    page = admin_client.get(f"/admin/ingest/rawevent/{row.pk}/change/")
    assert page.status_code == 200
    assert b"1e400" in page.content
