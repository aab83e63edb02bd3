"""The README tour's sample lab report (examples/sample-lab-report.pdf): a well-formed PDF that
the upload takes, which the simulator answers with a parsed report that becomes biomarkers."""

import re
from pathlib import Path

import pytest

from labs.models import Biomarker, LabUpload
from tests.demo.test_simulator import sent  # noqa: F401 - fixture
from tests.labs.helpers import run_workflows, upload

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample-lab-report.pdf"


def test_the_sample_is_a_small_well_formed_pdf():
    data = SAMPLE.read_bytes()
    assert data.startswith(b"%PDF-1.") and data.rstrip().endswith(b"%%EOF")
    assert len(data) < 10_000
    # The cross-reference table points at each object, and startxref at the table.
    startxref = int(re.search(rb"startxref\s+(\d+)\s+%%EOF\s*$", data).group(1))
    assert data[startxref:].startswith(b"xref")
    entries = re.findall(rb"(\d{10}) 00000 n", data[startxref:])
    assert len(entries) >= 6
    for number, offset in enumerate(entries, 1):
        assert data[int(offset) :].startswith(b"%d 0 obj" % number)


@pytest.mark.django_db
def test_the_sample_uploads_and_comes_back_as_biomarkers(user_api, alice, sent, post):  # noqa: F811
    response = upload(user_api, SAMPLE.read_bytes(), name=SAMPLE.name)
    assert response.status_code == 202, response.json()
    run_workflows()  # the lab-report workflow forwards it to the simulator (as Terra)
    (report,) = sent
    assert report["type"] == "lab_report.completed"
    assert post(report).status_code == 200
    run_workflows()
    row = LabUpload.objects.get(pk=response.json()["upload_id"])
    assert row.content_type == "application/pdf" and row.terra_status == "parsed"
    assert Biomarker.objects.filter(user=alice, lab_upload=row).count() == 4
