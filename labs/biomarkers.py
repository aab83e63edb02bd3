"""Writing the long `biomarkers` table: one measurement per (user, source, code, day), merged with
the spine's null-preserving upsert so replays converge; and Terra's flag → our status."""

from dataclasses import dataclass
from datetime import date

from ingest.normalizers.rows import upsert_keep_non_null
from labs.aliases import canonical_code
from labs.models import Biomarker, BiomarkerStatus

_OPTIMAL = {"normal", "optimal"}
_BORDERLINE = {"borderline", "low-normal", "high-normal"}
_OUT_OF_RANGE = {"high", "low", "abnormal", "critical"}


def status_from_flag(flag) -> str | None:
    """Terra's flag or classification → optimal | borderline | out_of_range; unknown → None."""
    if not isinstance(flag, str):
        return None
    key = flag.strip().lower().replace("_", "-").replace(" ", "-")
    if key in _OPTIMAL:
        return BiomarkerStatus.OPTIMAL
    if key in _BORDERLINE:
        return BiomarkerStatus.BORDERLINE
    if key in _OUT_OF_RANGE:
        return BiomarkerStatus.OUT_OF_RANGE
    return None


@dataclass(frozen=True)
class Measurement:
    raw_code: str
    measured_on: date
    name: str = ""
    value: float | None = None
    value_text: str | None = None
    unit: str | None = None
    reference_low: float | None = None
    reference_high: float | None = None
    status: str | None = None


def biomarker_upsert(
    *, user_id: int, source: str, measurement: Measurement, lab_upload_id=None, ordered_at=None
) -> int | None:
    """Insert or merge one biomarker; the code is the canonical one for raw_code. With
    `ordered_at` (body deliveries) a delivery older than the one that wrote the row changes
    nothing (newest wins)."""
    m = measurement
    return upsert_keep_non_null(
        Biomarker,
        key={
            "user_id": user_id,
            "source": source,
            "code": canonical_code(m.raw_code)[:100],
            "measured_on": m.measured_on,
        },
        values={
            "raw_code": m.raw_code[:100],
            "name": m.name[:255],
            "value": m.value,
            "value_text": m.value_text[:255] if m.value_text is not None else None,
            "unit": m.unit[:50] if m.unit else None,
            "reference_low": m.reference_low,
            "reference_high": m.reference_high,
            "status": m.status,
            "lab_upload_id": lab_upload_id,
            **({"ordered_at": ordered_at} if ordered_at is not None else {}),
        },
        ordered_by="ordered_at" if ordered_at is not None else None,
    )
