"""A user wipe (ingest.wipe, driven by the user-table registry) takes labs data and files along."""

from django.core.files.storage import default_storage

from ingest.wipe import user_wipe
from labs.models import Biomarker, BiomarkerWide, LabUpload
from tests.conftest import load_fixture
from tests.labs.helpers import PDF, upload


def test_wipe_deletes_uploads_biomarkers_and_stored_files(
    user_api, alice, bob, terra, django_capture_on_commit_callbacks
):
    terra.on("POST", "/v2/lab-reports", (200, load_fixture("lab_reports_upload_response.json")))
    upload(user_api, PDF)
    lab = LabUpload.objects.get()
    key = lab.storage_key
    Biomarker.objects.create(
        user=alice,
        source="terra_lab",
        code="ldl",
        value=1,
        measured_on="2026-07-01",
        lab_upload=lab,
    )
    Biomarker.objects.create(
        user=bob, source="terra_lab", code="ldl", value=2, measured_on="2026-07-01"
    )

    with django_capture_on_commit_callbacks(execute=True):
        counts = user_wipe(user=alice)

    assert counts["biomarkers"] == 1
    assert counts["lab_uploads"] == 1
    assert counts["stored_files"] == 1
    assert "biomarkers_wide" not in counts  # a view: it empties with its table
    assert not default_storage.exists(key)
    assert list(BiomarkerWide.objects.values_list("user_id", flat=True)) == [bob.pk]
