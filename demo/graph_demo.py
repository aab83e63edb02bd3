"""The graph workflow demo (`make run`): publish demo/graphs/lab-out-of-range.json with its
webhook pointed at a local stand-in, create a demo lab upload whose biomarkers include
out-of-range values, and start one run (it stops at the clinician's acknowledgement)."""

from datetime import date
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from graphs import io, services
from graphs.models import GraphRun
from labs.models import Biomarker, BiomarkerStatus, LabUpload

# Package data of the demo app, so an installed wheel has it too.
EXAMPLE = Path(__file__).resolve().parent / "graphs" / "lab-out-of-range.json"
BINDING = "lab-out-of-range"
DEMO_FILE = "demo-out-of-range.pdf"
MARKERS = [
    # code, name, value, unit, low, high, status
    ("ldl", "LDL cholesterol", 190.0, "mg/dL", 0.0, 130.0, BiomarkerStatus.OUT_OF_RANGE),
    ("hba1c", "HbA1c", 6.9, "%", 4.0, 5.6, BiomarkerStatus.OUT_OF_RANGE),
    ("vitamin_d", "Vitamin D", 45.0, "ng/mL", 30.0, 100.0, BiomarkerStatus.OPTIMAL),
]


def demo_document(hook_url: str) -> dict:
    document = io.load_file(str(EXAMPLE))
    for node in document["nodes"]:
        if node["ref"] == "notify":
            node["action"]["url"] = hook_url
    return document


@transaction.atomic
def demo_upload(username: str) -> LabUpload:
    """The demo user's out-of-range upload (created once, reused by later `make run`s)."""
    user, _ = get_user_model().objects.get_or_create(username=username)
    upload = LabUpload.objects.filter(user=user, original_name=DEMO_FILE).first()
    if upload is not None:
        return upload
    upload = LabUpload.objects.create(
        user=user,
        storage_key=f"demo/{DEMO_FILE}",
        original_name=DEMO_FILE,
        content_type="application/pdf",
        size=0,
        sha256="0" * 64,
        terra_status="parsed",
    )
    for code, name, value, unit, low, high, status in MARKERS:
        Biomarker.objects.update_or_create(
            user=user,
            source="terra_lab",
            code=code,
            measured_on=date.today(),
            defaults={
                "name": name,
                "value": value,
                "unit": unit,
                "reference_low": low,
                "reference_high": high,
                "status": status,
                "lab_upload": upload,
            },
        )
    return upload


def start_demo_run(*, hook_url: str, username: str = "demo") -> GraphRun:
    definition = io.import_document(
        demo_document(hook_url), publish=True, binding=BINDING, actor="rundemo"
    )
    upload = demo_upload(username)
    run_id = f"demo-lab-{upload.pk.hex[:12]}-v{definition.version}"
    existing = GraphRun.objects.filter(run_id=run_id).first()
    if existing is not None:
        return existing
    return services.run_create(
        binding_name=BINDING,
        run_input={"upload_id": str(upload.pk)},
        run_id=run_id,
        subject=upload.user,  # a run about the user's upload: their wipe deletes it
    )
