"""A correctly signed delivery is always stored, whatever its strings hold (NUL, lone surrogates,
over-long identifiers), and one bad item does not hold back the rest of its delivery."""

import json

import pytest

from ingest.models import Activity, RawEvent, RawEventState, TerraConnection, TraceEvent
from tests.conftest import load_fixture
from tests.ingest.conftest import TERRA_USER

pytestmark = pytest.mark.django_db

NUL, LONE = "\u0000", "\ud800"
FINISHED = {RawEventState.PROCESSED, RawEventState.SKIPPED, RawEventState.PARKED}


def _with(payload: dict, path: tuple[str, ...], value: str) -> dict:
    target = payload
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
    return payload


def _escaped(text: str) -> str:
    return text.replace(NUL, "\\u0000").replace(LONE, "\\ud800")


ENVELOPE_FIELDS = [
    ("daily.json", ("type",)),
    ("daily.json", ("user", "user_id")),
    ("daily.json", ("user", "reference_id")),
    ("auth.json", ("user", "user_id")),
    ("auth.json", ("user", "reference_id")),
    ("user_reauth.json", ("new_user", "user_id")),
    ("user_reauth.json", ("new_user", "reference_id")),
]


@pytest.mark.parametrize("bad", [NUL, LONE], ids=["nul", "lone_surrogate"])
@pytest.mark.parametrize("fixture,path", ENVELOPE_FIELDS, ids=lambda v: str(v))
def test_a_signed_delivery_with_a_hostile_envelope_string_is_stored_and_finishes(
    post, fixture, path, bad
):
    # Seen: 500 and never stored (PostgreSQL text cannot hold NUL; psycopg cannot encode a lone
    # surrogate), so every retry of Terra's failed the same way.
    payload = _with(load_fixture(fixture), path, f"a{bad}b")
    body = json.dumps(payload).encode()
    response = post(body)
    assert response.status_code == 200, response.content
    row = RawEvent.objects.get()
    assert bytes(row.body) == body  # the exact bytes
    copied = {
        ("type",): row.event_type,
        ("user", "user_id"): row.terra_user_id,
        ("new_user", "user_id"): row.terra_user_id,
        ("user", "reference_id"): row.reference_id,
        ("new_user", "reference_id"): row.reference_id,
    }[path]
    assert copied.startswith(_escaped(f"a{bad}b")[:64])
    assert row.state in FINISHED, (row.state, row.process_error)


@pytest.mark.parametrize("bad", [NUL, LONE], ids=["nul", "lone_surrogate"])
def test_a_lab_report_whose_upload_id_holds_a_hostile_string_is_stored(post, bad):
    body = json.dumps(
        {"type": "lab_report.completed", "upload_id": f"up{bad}1", "data": {"results": []}}
    ).encode()
    assert post(body).status_code == 200
    row = RawEvent.objects.get()
    assert row.reference_id == _escaped(f"up{bad}1")
    assert row.state in FINISHED


def test_a_terra_user_id_of_200_characters_connects(post):
    # Seen: a user_id over 64 characters parked on a varchar(64) overflow.
    long_id = "u" * 200
    payload = _with(load_fixture("auth.json"), ("user", "user_id"), long_id)
    post(payload)
    row = RawEvent.objects.get()
    assert row.terra_user_id == long_id
    assert row.state == RawEventState.PROCESSED, row.process_error
    assert TerraConnection.objects.get().terra_user_id == long_id


def test_an_identifier_too_long_for_its_column_is_left_out_with_the_reason(post):
    payload = _with(load_fixture("daily.json"), ("user", "user_id"), "u" * 300)
    assert post(payload).status_code == 200
    row = RawEvent.objects.get()
    assert row.terra_user_id == ""
    received = TraceEvent.objects.get(raw_event=row, event="webhook_received")
    assert received.data["envelope"] == {"user_id": "too_long"}
    assert row.state in FINISHED


def test_an_activity_whose_name_holds_a_nul_is_written_with_the_others(post, fixture_payload):
    # Seen: a NUL in one activity's name parked the whole delivery; every other item withheld.
    post(fixture_payload("auth.json", terra_user=TERRA_USER))
    payload = fixture_payload("activity.json", terra_user=TERRA_USER)
    first = dict(payload["data"][0])
    second = json.loads(json.dumps(first))
    first["metadata"] = {**first["metadata"], "name": f"Run{NUL}", "summary_id": "a-1"}
    second["metadata"] = {**second["metadata"], "name": "Walk", "summary_id": "a-2"}
    payload["data"] = [first, second]
    post(payload)
    row = RawEvent.objects.get(event_type="activity")
    assert row.state == RawEventState.PROCESSED, row.process_error
    names = dict(Activity.objects.values_list("record_key", "name"))
    assert names == {"a-1": "Run\\u0000", "a-2": "Walk"}


def test_an_item_whose_value_is_out_of_range_is_left_out_and_the_others_are_written(
    post, fixture_payload
):
    # Seen: steps = 1e20 parked the whole delivery.
    post(fixture_payload("auth.json", terra_user=TERRA_USER))
    payload = fixture_payload("daily.json", terra_user=TERRA_USER)
    good = payload["data"][0]
    bad = json.loads(json.dumps(good))
    bad["metadata"]["start_time"] = "2026-02-02T00:00:00+00:00"
    bad["distance_data"]["steps"] = 10**20
    payload["data"] = [good, bad]
    post(payload)
    row = RawEvent.objects.get(event_type="daily")
    assert row.state == RawEventState.PROCESSED, row.process_error
    from ingest.models import DailySummary

    assert DailySummary.objects.count() == 1
    normalized = TraceEvent.objects.get(raw_event=row, event="normalized")
    assert normalized.data["unmapped"] == {"value_out_of_range": 1}
