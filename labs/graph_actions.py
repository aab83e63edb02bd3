"""Graph actions that labs offers to graph definitions (registered from LabsConfig.ready()).

labs → graphs is a downward import: graphs sits on workflows, below labs."""

import uuid

from graphs import graph_action
from labs.models import Biomarker, BiomarkerStatus, LabUpload
from workflows import NonRetryableError


def _out_of_range(marker: Biomarker) -> bool:
    if marker.status == BiomarkerStatus.OUT_OF_RANGE:
        return True
    if marker.value is None:
        return False
    low, high = marker.reference_low, marker.reference_high
    return (low is not None and marker.value < low) or (high is not None and marker.value > high)


@graph_action("labs.out_of_range_markers")
def out_of_range_markers(input: dict) -> dict:  # noqa: A002 - the action contract's name
    """{"upload_id"} → {"upload_id", "markers": [...]}: the upload's out-of-range biomarkers."""
    upload_id = str(input.get("upload_id") or "")
    try:
        uuid.UUID(upload_id)
    except ValueError:
        raise NonRetryableError(f"upload_id {upload_id!r} is not a lab upload id") from None
    if not LabUpload.objects.filter(pk=upload_id).exists():
        raise NonRetryableError(f"no lab upload {upload_id}")
    rows = Biomarker.objects.filter(lab_upload_id=upload_id).order_by("code")
    markers = [
        {
            "code": m.code,
            "name": m.name,
            "value": m.value,
            "unit": m.unit,
            "reference_low": m.reference_low,
            "reference_high": m.reference_high,
            "measured_on": m.measured_on.isoformat(),
        }
        for m in rows
        if _out_of_range(m)
    ]
    return {"upload_id": upload_id, "markers": markers}
