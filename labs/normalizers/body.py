"""The `body` normalizer: Terra body data → biomarkers, per day and per source `<provider>_body`.

Per data item, on the calendar date written in `metadata.start_time` (no UTC conversion: a
`+01:00` midnight is that day): systolic/diastolic blood pressure averaged over the day's
samples, the day's latest weight and body-fat measurements, resting heart rate. Glucose streams
are not stored (they are dense time series, not daily markers); they are counted and traced."""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date

from django.db import transaction

from ingest.normalizers.common import ITEM_READS, MappingReport, not_connected, resolve
from ingest.registry import NormalizeResult, register
from ingest.traces import trace_write
from labs.biomarkers import Measurement, biomarker_upsert
from labs.normalizers.values import as_date as _day
from labs.normalizers.values import as_dict as _dict
from labs.normalizers.values import as_number as _number
from labs.normalizers.values import as_text as _text

GLUCOSE_STREAMS = ("blood_glucose_samples", "detailed_blood_glucose_samples")
# Every item path body_days reads (a big delivery keeps only these); glucose streams are only
# counted, so they are read as their length.
BODY_READS = (
    *ITEM_READS,
    "blood_pressure_data.blood_pressure_samples[].systolic_bp",
    "blood_pressure_data.blood_pressure_samples[].diastolic_bp",
    "measurements_data.measurements[].measurement_time",
    "measurements_data.measurements[].weight_kg",
    "measurements_data.measurements[].bodyfat_percentage",
    "heart_data.heart_rate_data.summary.resting_hr_bpm",
    *(f"glucose_data.{stream}.#count" for stream in GLUCOSE_STREAMS),
)


@dataclass
class BodyDay:
    systolic: list[float] = field(default_factory=list)
    diastolic: list[float] = field(default_factory=list)
    # (time written, value): the day's latest reading wins
    weight: list[tuple[str, float]] = field(default_factory=list)
    body_fat: list[tuple[str, float]] = field(default_factory=list)
    resting_hr: float | None = None


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _latest(readings: list[tuple[str, float]]) -> float | None:
    return max(readings, key=lambda r: r[0])[1] if readings else None


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 2) if values else None


def body_days(payload: dict) -> tuple[dict[date, BodyDay], int]:
    """Group the payload's readings by day; also return how many glucose samples were skipped."""
    days: dict[date, BodyDay] = defaultdict(BodyDay)
    glucose = 0
    for item in _list(payload.get("data")):
        item = _dict(item)
        day = _day(_dict(item.get("metadata")).get("start_time"))
        glucose += sum(len(_list(_dict(item.get("glucose_data")).get(s))) for s in GLUCOSE_STREAMS)
        if day is None:
            continue
        values = days[day]
        for sample in _list(_dict(item.get("blood_pressure_data")).get("blood_pressure_samples")):
            sample = _dict(sample)
            if (v := _number(sample.get("systolic_bp"))) is not None:
                values.systolic.append(v)
            if (v := _number(sample.get("diastolic_bp"))) is not None:
                values.diastolic.append(v)
        for m in _list(_dict(item.get("measurements_data")).get("measurements")):
            m = _dict(m)
            at = _text(m.get("measurement_time")) or ""
            if (v := _number(m.get("weight_kg"))) is not None:
                values.weight.append((at, v))
            if (v := _number(m.get("bodyfat_percentage"))) is not None:
                values.body_fat.append((at, v))
        summary = _dict(_dict(_dict(item.get("heart_data")).get("heart_rate_data")).get("summary"))
        if (v := _number(summary.get("resting_hr_bpm"))) is not None:
            values.resting_hr = v
    return dict(days), glucose


def day_measurements(day: date, values: BodyDay) -> list[Measurement]:
    candidates = (
        ("systolic_bp", "Systolic blood pressure", _mean(values.systolic), "mmHg"),
        ("diastolic_bp", "Diastolic blood pressure", _mean(values.diastolic), "mmHg"),
        ("weight_kg", "Weight", _latest(values.weight), "kg"),
        ("body_fat_percent", "Body fat", _latest(values.body_fat), "%"),
        ("resting_heart_rate", "Resting heart rate", values.resting_hr, "bpm"),
    )
    return [
        Measurement(raw_code=code, name=name, value=value, unit=unit, measured_on=day)
        for code, name, value, unit in candidates
        if value is not None
    ]


@register("body", reads=BODY_READS)
def normalize_body(raw_event) -> NormalizeResult:
    user = resolve(raw_event)  # also records the user on the row, like ingest's normalizers
    if user is None:
        return not_connected()
    payload = _dict(raw_event.payload)
    provider = _text(_dict(payload.get("user")).get("provider")) or raw_event.provider or "unknown"
    source = f"{provider.lower()}_body"
    days, glucose = body_days(payload)
    written = 0
    with transaction.atomic():
        for day, values in sorted(days.items()):
            for measurement in day_measurements(day, values):
                biomarker_upsert(
                    user_id=user.pk,
                    source=source,
                    measurement=measurement,
                    ordered_at=raw_event.ordered_at,
                )
                written += 1
    if glucose:
        trace_write(
            "body_glucose_skipped",
            raw_event_id=raw_event.pk,
            user_id=user.pk,
            data={"glucose_samples": glucose},
        )
    if written == 0 and glucose:
        # Nothing stored but glucose: acknowledged as skipped so the row does not look empty.
        return NormalizeResult(ok=True, skipped=f"glucose_only:{glucose}")
    if written == 0:
        # Nothing mapped: say why (unmappable:<reason>) rather than "processed" with 0 rows.
        report = MappingReport(raw_event)
        items = report.items()
        if items:
            reason = "bad_start_time" if not days else "no_measurements"
            for item in items:
                report.unmapped(item, reason)
        return report.result()
    return NormalizeResult(ok=True, rows=written)
