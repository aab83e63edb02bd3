"""Lab-report webhooks end to end: signed delivery → raw event → consumer → biomarkers, for every
shape Terra has used, plus lab_report.failed, parking and status mapping."""

import copy
from datetime import date

import pytest

from ingest.consumer import raw_event_consume
from ingest.models import RawEvent
from ingest.registry import normalizer_for
from labs.biomarkers import status_from_flag
from labs.models import Biomarker, LabUpload
from tests.conftest import load_fixture
from tests.factories import RawEventFactory
from tests.labs.helpers import PDF, run_workflows, upload


def uploaded(user_api, terra, terra_upload_id: str) -> LabUpload:
    """A real upload through the API, Terra answering with `terra_upload_id`."""
    terra.on("POST", "/v2/lab-reports", (200, {"upload_id": terra_upload_id}))
    response = upload(user_api, PDF)
    assert response.status_code == 202
    run_workflows()  # the lab-report workflow forwards it
    return LabUpload.objects.get(pk=response.json()["upload_id"])


def delivered(deliver, payload) -> RawEvent:
    response = deliver(payload)
    assert response.status_code == 200, response.content
    assert response.json()["type"] == "lab_report"
    raw_event_consume(response.json()["raw_event_id"])
    run_workflows()  # the upload's instance stores what the normalizer handed it
    return RawEvent.objects.get(pk=response.json()["raw_event_id"])


def markers(user) -> dict[str, Biomarker]:
    return {b.code: b for b in Biomarker.objects.filter(user=user)}


def test_current_envelope_with_layered_results(user_api, alice, terra, deliver):
    lab = uploaded(user_api, terra, "upl_9d6e5f2a1c7b")

    event = delivered(deliver, load_fixture("lab_report.completed.json"))

    assert event.state == "processed", event.process_error
    assert event.user == alice  # the upload's owner, recorded on the delivery
    (hb,) = Biomarker.objects.filter(user=alice)
    assert (hb.source, hb.code, hb.raw_code, hb.name) == (
        "terra_lab",
        "hemoglobin",
        "hemoglobin",
        "Hemoglobin",
    )
    assert (hb.value, hb.value_text, hb.unit) == (14.2, "14.2", "g/dL")
    assert hb.status == "optimal"
    assert hb.measured_on == date(2026, 6, 29)  # the collection date, not the report date
    assert hb.lab_upload_id == lab.pk
    lab.refresh_from_db()
    assert lab.terra_status == "parsed"
    assert lab.parsed_at is not None


def test_draft_envelope_with_flat_results(user_api, alice, terra, deliver):
    uploaded(user_api, terra, "upl_4a2b8c1d")

    event = delivered(deliver, load_fixture("lab_report.completed.flat_results_draft.json"))

    assert event.state == "processed", event.process_error
    found = markers(alice)
    assert set(found) == {"hemoglobin", "tsh", "hepatitis_b_surface_antigen", "psa"}
    hb, tsh = found["hemoglobin"], found["tsh"]
    assert (hb.value, hb.unit, hb.reference_low, hb.reference_high, hb.status) == (
        14.2,
        "g/dL",
        13.0,
        17.0,
        "optimal",
    )
    assert hb.measured_on == date(2026, 3, 15)
    assert tsh.raw_code == "thyroid_stimulating_hormone"
    assert tsh.measured_on == date(2026, 3, 15)  # no collection date: the report date
    hep = found["hepatitis_b_surface_antigen"]  # unmapped: lands under its raw code
    assert (hep.value, hep.value_text, hep.status) == (None, "Negative", None)
    psa = found["psa"]
    assert (psa.value, psa.value_text, psa.status) == (None, "<0.04", "optimal")


def test_oldest_shape_without_type(user_api, alice, terra, deliver):
    lab = uploaded(user_api, terra, "upl_oldest")
    flat = load_fixture("lab_report.completed.flat_results_draft.json")["data"]["results"]
    results = [{k: v for k, v in r.items() if k != "collection_date"} for r in flat[:2]]
    payload = {"upload_id": "upl_oldest", "data": [{"results": results}]}

    event = delivered(deliver, payload)

    assert event.state == "processed", event.process_error
    assert event.reference_id == "upl_oldest"
    found = markers(alice)
    assert set(found) == {"hemoglobin", "tsh"}
    # neither a collection nor a report date: the day the report arrived
    assert found["hemoglobin"].measured_on == event.received_at.date()
    lab.refresh_from_db()
    assert lab.terra_status == "parsed"


def test_failed_report_marks_the_upload_and_keeps_terras_error(user_api, terra, deliver):
    lab = uploaded(user_api, terra, "upl_4a2b8c1d")

    event = delivered(deliver, load_fixture("lab_report.failed.flat_results_draft.json"))

    assert event.state == "processed", event.process_error
    lab.refresh_from_db()
    assert lab.terra_status == "failed:parse"
    assert lab.terra_response["lab_report_failed"]["code"] == "extraction_failed"
    assert lab.terra_response["upload_id"] == "upl_4a2b8c1d"  # the submit answer is kept too
    assert Biomarker.objects.count() == 0


def test_failed_report_without_upload_id_is_parked(user_api, terra, deliver):
    lab = uploaded(user_api, terra, "upl_unrelated")

    event = delivered(deliver, load_fixture("lab_report.failed.json"))

    assert event.state == "parked"
    assert event.process_error == "no_lab_upload_for_upload_id"
    lab.refresh_from_db()
    assert lab.terra_status == "submitted"


def test_failed_report_with_upload_id_only_in_data_is_matched(user_api, terra, deliver):
    lab = uploaded(user_api, terra, "upl_in_data")
    payload = load_fixture("lab_report.failed.json")
    payload["data"]["upload_id"] = "upl_in_data"

    event = delivered(deliver, payload)

    assert event.state == "processed", event.process_error
    lab.refresh_from_db()
    assert lab.terra_status == "failed:parse"


def test_report_for_an_unknown_upload_is_parked(db, deliver):
    event = delivered(deliver, load_fixture("lab_report.completed.json"))

    assert event.state == "parked"
    assert event.process_error == "no_lab_upload_for_upload_id"
    assert Biomarker.objects.count() == 0


def test_replaying_a_report_converges(user_api, alice, terra, deliver):
    uploaded(user_api, terra, "upl_4a2b8c1d")
    payload = load_fixture("lab_report.completed.flat_results_draft.json")
    event = delivered(deliver, payload)
    before = {(b.code, b.value, b.value_text, b.status) for b in Biomarker.objects.all()}

    result = normalizer_for("lab_report")(event)

    assert result.ok
    after = {(b.code, b.value, b.value_text, b.status) for b in Biomarker.objects.all()}
    assert after == before
    assert Biomarker.objects.count() == 4


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "lab_report.completed", "upload_id": "u", "data": "not an object"},
        {"type": "lab_report.completed", "upload_id": "u", "data": {"no_results": True}},
        {"type": "lab_report.processing", "upload_id": "u", "data": {}},
        {"upload_id": "u", "data": [{"not_results": []}]},
        {"upload_id": "u", "data": ["nope"]},
        ["a", "list"],
        "a string",
    ],
)
def test_unknown_shapes_park_without_raising(db, payload):
    event = RawEventFactory(event_type="lab_report", terra_user_id="", payload=payload)

    result = normalizer_for("lab_report")(event)

    assert not result.ok
    assert result.error == "unrecognized_lab_payload"


def test_odd_results_inside_a_known_shape_are_skipped_not_fatal(user_api, alice, terra):
    lab = uploaded(user_api, terra, "upl_odd")
    good = load_fixture("lab_report.completed.json")["data"]["results"][0]
    no_key = copy.deepcopy(good)
    no_key["biomarker"]["key"] = None  # Terra matched nothing: kept under the printed name
    payload = {
        "type": "lab_report.completed",
        "upload_id": "upl_odd",
        "data": {"results": [good, "junk", {}, no_key]},
    }
    event = RawEventFactory(event_type="lab_report", terra_user_id="", payload=payload)

    result = normalizer_for("lab_report")(event)
    run_workflows()  # the upload's lab-report instance stores them

    assert result.ok and result.rows == 2
    # the unmatched result's printed name "Haemoglobin" aliases to the same code and day: merged
    assert set(markers(alice)) == {"hemoglobin"}
    assert markers(alice)["hemoglobin"].raw_code == "haemoglobin"
    lab.refresh_from_db()
    assert lab.terra_status == "parsed"


@pytest.mark.parametrize(
    "flag,status",
    [
        ("normal", "optimal"),
        ("Optimal", "optimal"),
        ("borderline", "borderline"),
        ("low-normal", "borderline"),
        ("high_normal", "borderline"),
        ("high", "out_of_range"),
        ("LOW", "out_of_range"),
        ("abnormal", "out_of_range"),
        ("critical", "out_of_range"),
        (None, None),
        ("", None),
        ("weird", None),
    ],
)
def test_flag_to_status(flag, status):
    assert status_from_flag(flag) == status
