"""Console: lab uploads (filters, search, download, retry forwarding) and biomarkers."""

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.urls import reverse

from labs.models import Biomarker, LabUpload
from labs.services import lab_uploads_retry_forwarding
from ops.models import AuditLog
from tests.labs.helpers import PDF

CHANGELIST = "/admin/labs/labupload/"


@pytest.fixture
def staff_client(client, staff):
    client.force_login(staff)
    return client


def stored_upload(user, *, status: str, key_suffix: str = "a") -> LabUpload:
    key = default_storage.save(f"lab-uploads/{user.username}/{key_suffix}.pdf", ContentFile(PDF))
    return LabUpload.objects.create(
        user=user,
        storage_key=key,
        original_name="report.pdf",
        content_type="application/pdf",
        size=len(PDF),
        sha256="0" * 64,
        terra_status=status,
        terra_response={"message": "Bad Gateway", "nested": {"a": 1}},
    )


def test_changelist_filters_and_search(staff_client, alice, bob):
    failed = stored_upload(alice, status="failed:502", key_suffix="f")
    stored_upload(bob, status="submitted", key_suffix="s")
    stored_upload(alice, status="failed:parse", key_suffix="p")

    by_status = staff_client.get(CHANGELIST, {"terra_status": "forward_failed"})
    by_user = staff_client.get(CHANGELIST, {"q": "bob"})

    assert by_status.status_code == 200
    assert list(by_status.context["cl"].result_list) == [failed]
    assert {u.user.username for u in by_user.context["cl"].result_list} == {"bob"}


def test_detail_pretty_prints_terra_response_and_links_download(staff_client, alice):
    upload = stored_upload(alice, status="failed:502")
    Biomarker.objects.create(
        user=alice,
        source="terra_lab",
        code="ferritin",
        value=88,
        measured_on="2026-07-01",
        lab_upload=upload,
    )

    page = staff_client.get(reverse("admin:labs_labupload_change", args=[upload.pk]))

    html = page.content.decode()
    assert page.status_code == 200
    assert "<pre>{\n  &quot;message&quot;: &quot;Bad Gateway&quot;," in html
    assert reverse("admin:labs_labupload_download", args=[upload.pk]) in html
    assert "ferritin" in html  # the upload's markers, inline


def test_staff_download_streams_the_stored_file(staff_client, alice):
    upload = stored_upload(alice, status="submitted")

    response = staff_client.get(reverse("admin:labs_labupload_download", args=[upload.pk]))

    assert response.status_code == 200
    assert b"".join(response.streaming_content) == PDF
    assert response["Content-Type"] == "application/pdf"
    assert f'filename="{upload.pk}.pdf"' in response["Content-Disposition"]


def test_download_is_for_staff_only(client, alice):
    upload = stored_upload(alice, status="submitted")
    client.force_login(alice)

    response = client.get(reverse("admin:labs_labupload_download", args=[upload.pk]))

    assert response.status_code == 302  # to the admin login, never the file
    assert "/admin/login/" in response["Location"]


def test_retry_forwarding_asks_for_confirmation_first(staff_client, alice, terra):
    failed = stored_upload(alice, status="failed:network")

    page = staff_client.post(
        CHANGELIST, {"action": "retry_forwarding", "_selected_action": [failed.pk]}
    )

    assert page.status_code == 200
    assert b"will be forwarded again" in page.content
    assert terra.calls("POST", "/v2/lab-reports") == []


def test_retry_forwarding_resends_failed_uploads_only(staff_client, alice, terra):
    terra.on("POST", "/v2/lab-reports", (200, {"upload_id": "upl_retry"}))
    failed = stored_upload(alice, status="failed:500", key_suffix="f")
    parsed = stored_upload(alice, status="parsed", key_suffix="p")

    response = staff_client.post(
        CHANGELIST,
        {
            "action": "retry_forwarding",
            "_selected_action": [failed.pk, parsed.pk],
            "confirm": "yes",
        },
        follow=True,
    )

    failed.refresh_from_db()
    parsed.refresh_from_db()
    assert (failed.terra_status, failed.terra_upload_id) == ("submitted", "upl_retry")
    assert parsed.terra_status == "parsed"
    (request,) = terra.calls("POST", "/v2/lab-reports")
    assert PDF in request.read()
    message = str(list(response.context["messages"])[0])
    assert "Retried 1 upload(s): 1 submitted, 0 failed again; 1 not in a failed state" in message
    audit = AuditLog.objects.get(action="lab_upload.retry_forwarding")
    assert audit.resource == f"lab_upload:{failed.pk}"
    assert audit.result == "submitted"
    assert audit.actor == "user:charlie"


def test_biomarker_changelist_filters(staff_client, alice):
    Biomarker.objects.create(
        user=alice, source="terra_lab", code="ldl", value=130, measured_on="2026-07-01"
    )
    Biomarker.objects.create(
        user=alice,
        source="garmin_body",
        code="weight_kg",
        value=72,
        status="optimal",
        measured_on="2026-07-01",
    )

    for params in ({"code": "ldl"}, {"status": "optimal"}, {"source": "garmin_body"}):
        page = staff_client.get("/admin/labs/biomarker/", params)
        assert page.status_code == 200
        assert len(page.context["cl"].result_list) == 1, params


def test_retry_forwarding_skips_an_upload_another_operator_already_took(staff_client, alice, terra):
    failed = stored_upload(alice, status="failed:503")
    # another console retried it between our page load and our click
    LabUpload.objects.filter(pk=failed.pk).update(terra_status="submitted")

    stale = LabUpload.objects.get(pk=failed.pk)
    stale.terra_status = "failed:503"
    counts = lab_uploads_retry_forwarding(uploads=[stale])

    assert counts == {"retried": 0, "submitted": 0, "failed": 0, "ignored": 1}
    assert terra.calls("POST", "/v2/lab-reports") == []


def test_retry_that_fails_again_is_reported_as_such(staff_client, alice, terra):
    terra.on("POST", "/v2/lab-reports", (503, {"message": "down"}))
    failed = stored_upload(alice, status="failed:network")

    response = staff_client.post(
        CHANGELIST,
        {"action": "retry_forwarding", "_selected_action": [failed.pk], "confirm": "yes"},
        follow=True,
    )

    failed.refresh_from_db()
    assert failed.terra_status == "failed:503"
    assert "0 submitted, 1 failed again" in str(list(response.context["messages"])[0])
    assert AuditLog.objects.get(action="lab_upload.retry_forwarding").result == "failed:503"
