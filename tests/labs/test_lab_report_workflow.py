"""The lab round trip as the `lab-report` workflow, end to end: the upload answers 202 with the
instance id, the instance forwards to Terra (mocked at the HTTP boundary) with retries, waits for
the signed lab_report webhook and stores the biomarkers; every business outcome ends complete
with {"status": <final terra_status>}."""

from datetime import UTC, datetime

import httpx
import pytest

from ingest.consumer import raw_event_consume
from labs.models import Biomarker, LabUpload
from tests.conftest import load_fixture
from tests.labs.helpers import PDF, upload
from workflows.testing import WorkflowHarness

TERRA_PATH = "/v2/lab-reports"
TERRA_ID = "upl_9d6e5f2a1c7b"  # the upload id in lab_report.completed.json


@pytest.fixture
def harness(db, settings):
    with WorkflowHarness(start=datetime(2026, 3, 1, 9, 0, tzinfo=UTC)) as h:
        yield h


def answers(*responses):
    """A Terra handler answering each POST with the next of `responses` (the last repeats)."""
    queue = list(responses)

    def handler(request):
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return handler


def uploaded(user_api, harness) -> tuple[LabUpload, dict]:
    response = upload(user_api, PDF)
    assert response.status_code == 202, response.json()
    body = response.json()
    harness.run_until_idle()
    return LabUpload.objects.get(pk=body["upload_id"]), body


def webhook(deliver, harness, payload=None):
    response = deliver(payload or load_fixture("lab_report.completed.json"))
    assert response.status_code == 200, response.content
    raw_event_consume(response.json()["raw_event_id"])
    harness.run_until_idle()


def test_success_forwards_waits_for_the_webhook_and_stores_biomarkers(
    user_api, alice, terra, deliver, harness
):
    terra.on("POST", TERRA_PATH, (200, {"upload_id": TERRA_ID}))
    lab, body = uploaded(user_api, harness)
    assert body == {"upload_id": str(lab.pk), "status": "pending", "instance_id": f"lab-{lab.pk}"}
    assert lab.terra_status == "submitted" and lab.terra_upload_id == TERRA_ID
    assert harness.status("lab-report", f"lab-{lab.pk}") == {"status": "waiting"}
    webhook(deliver, harness)
    assert harness.status("lab-report", f"lab-{lab.pk}") == {
        "status": "complete",
        "output": {"status": "parsed"},
    }
    lab.refresh_from_db()
    assert lab.terra_status == "parsed" and lab.parsed_at is not None
    assert Biomarker.objects.filter(user=alice, lab_upload=lab).count() > 0


def test_a_503_is_retried_with_backoff_then_succeeds(user_api, terra, deliver, harness):
    terra.on(
        "POST",
        TERRA_PATH,
        answers(
            httpx.Response(503, json={"message": "busy"}),
            httpx.Response(200, json={"upload_id": TERRA_ID}),
        ),
    )
    lab, _ = uploaded(user_api, harness)
    assert lab.terra_status == "pending"  # still the workflow's to retry
    assert lab.terra_response == {"message": "busy"}
    assert len(terra.calls("POST", TERRA_PATH)) == 1
    harness.advance("10 seconds")
    lab.refresh_from_db()
    assert lab.terra_status == "submitted"
    assert len(terra.calls("POST", TERRA_PATH)) == 2
    webhook(deliver, harness)
    assert harness.status("lab-report", lab.instance_id)["output"] == {"status": "parsed"}


def test_network_errors_that_never_stop_end_failed_network(user_api, terra, harness):
    terra.on("POST", TERRA_PATH, httpx.ConnectError("connection refused"))
    lab, _ = uploaded(user_api, harness)
    for _ in range(6):
        harness.advance("10 minutes")
    assert len(terra.calls("POST", TERRA_PATH)) == 6  # first attempt + 5 retries
    assert harness.status("lab-report", lab.instance_id) == {
        "status": "complete",
        "output": {"status": "failed:network"},
    }
    lab.refresh_from_db()
    assert lab.terra_status == "failed:network"


def test_a_400_fails_at_once_with_its_status(user_api, terra, harness):
    terra.on("POST", TERRA_PATH, (400, {"message": "No Files Provided"}))
    lab, _ = uploaded(user_api, harness)
    assert len(terra.calls("POST", TERRA_PATH)) == 1
    assert harness.status("lab-report", lab.instance_id) == {
        "status": "complete",
        "output": {"status": "failed:400"},
    }
    lab.refresh_from_db()
    assert lab.terra_status == "failed:400"
    assert lab.terra_response == {"message": "No Files Provided"}


def test_no_webhook_within_lab_report_timeout_ends_failed_timeout(user_api, terra, harness):
    terra.on("POST", TERRA_PATH, (200, {"upload_id": TERRA_ID}))
    lab, _ = uploaded(user_api, harness)
    harness.advance("1 hour")
    assert harness.status("lab-report", lab.instance_id) == {"status": "waiting"}
    harness.advance("1 hour")  # the default LAB_REPORT_TIMEOUT is 2 hours
    assert harness.status("lab-report", lab.instance_id) == {
        "status": "complete",
        "output": {"status": "failed:timeout"},
    }
    lab.refresh_from_db()
    assert lab.terra_status == "failed:timeout"


def test_lab_report_timeout_is_a_setting(user_api, terra, harness, settings):
    settings.LAB_REPORT_TIMEOUT = "10 minutes"
    terra.on("POST", TERRA_PATH, (200, {"upload_id": TERRA_ID}))
    lab, _ = uploaded(user_api, harness)
    harness.advance("10 minutes")
    assert harness.status("lab-report", lab.instance_id)["output"] == {"status": "failed:timeout"}


def test_a_failed_report_ends_complete_with_failed_parse(user_api, terra, deliver, harness):
    terra.on("POST", TERRA_PATH, (200, {"upload_id": "upl_4a2b8c1d"}))
    lab, _ = uploaded(user_api, harness)
    webhook(deliver, harness, load_fixture("lab_report.failed.flat_results_draft.json"))
    assert harness.status("lab-report", lab.instance_id)["output"] == {"status": "failed:parse"}


def test_upload_is_created_with_its_instance_in_one_transaction(user_api, terra, harness):
    from workflows.models import WorkflowInstance

    terra.on("POST", TERRA_PATH, (200, {"upload_id": TERRA_ID}))
    response = upload(user_api, PDF)
    lab = LabUpload.objects.get(pk=response.json()["upload_id"])
    instance = WorkflowInstance.objects.get(workflow_name="lab-report", instance_id=lab.instance_id)
    assert instance.params == {"upload_id": str(lab.pk)}
    assert instance.status == "active"  # created, not yet run: the forward is the workflow's


def test_upload_detail_and_console_link_the_instance(user_api, staff, client, terra, harness):
    terra.on("POST", TERRA_PATH, (200, {"upload_id": TERRA_ID}))
    lab, _ = uploaded(user_api, harness)
    detail = user_api.get(f"/v1/labs/uploads/{lab.pk}").json()
    assert detail["instance_id"] == f"lab-{lab.pk}"
    client.force_login(staff)
    page = client.get(f"/admin/labs/labupload/{lab.pk}/change/")
    instance = harness.instance("lab-report", lab.instance_id)
    assert f"/admin/workflows/workflowinstance/{instance.pk}/change/".encode() in page.content
