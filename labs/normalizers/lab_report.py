"""The `lab_report` normalizer: Terra's OCR results for an upload → biomarkers (source terra_lab).

Shapes Terra has used, all accepted:
- oldest: no `type`, `{"upload_id", "data": [{"results": [flat, ...]}, ...]}`;
- envelope `lab_report.completed` with `data.results` either flat (the published draft:
  `biomarker` string, `value`, `value_lt`, `display_units`, `reference_ranges[].classification`)
  or layered (`source`, `biomarker{key}`, `measurement`, `interpretation{flag}`), told apart per
  result;
- envelope `lab_report.failed` → the upload's terra_status becomes failed:parse.
Anything else parks with `unrecognized_lab_payload`; this module never raises on payload shape.
"""

import logging
from dataclasses import dataclass
from datetime import date

from django.db import transaction
from django.utils import timezone

from ingest.registry import NormalizeResult, register
from labs.aliases import normalize_key
from labs.biomarkers import Measurement, biomarker_upsert, status_from_flag
from labs.models import LabUpload
from labs.normalizers.values import as_date as _day
from labs.normalizers.values import as_dict as _dict
from labs.normalizers.values import as_number as _number
from labs.normalizers.values import as_text as _text
from labs.services import FAILED_PARSE, LAB_WORKFLOW, PARSED, lab_upload_status

log = logging.getLogger(__name__)

SOURCE = "terra_lab"
COMPLETED = "lab_report.completed"
FAILED = "lab_report.failed"
UNRECOGNIZED = "unrecognized_lab_payload"
NO_UPLOAD = "no_lab_upload_for_upload_id"


@dataclass(frozen=True)
class LabReport:
    upload_ids: tuple[str, ...]
    # (result, report date written on the report or None)
    results: tuple[tuple[dict, str | None], ...] = ()
    error: dict | None = None  # set for lab_report.failed

    @property
    def failed(self) -> bool:
        return self.error is not None


def lab_report_parse(payload) -> LabReport | None:
    """Which shape this is, reduced to upload ids, results and error; None when unrecognized."""
    if not isinstance(payload, dict):
        return None
    kind = payload.get("type")
    data = payload.get("data")
    ids = [_text(payload.get("upload_id"))]
    if kind is None and _text(payload.get("upload_id")) and isinstance(data, list):
        results = []
        for item in data:
            if not isinstance(item, dict) or not isinstance(item.get("results"), list):
                return None
            report_date = _text(item.get("report_date"))
            results.extend((r, report_date) for r in item["results"])
        return LabReport(upload_ids=tuple(filter(None, ids)), results=tuple(results))
    if not isinstance(data, dict):
        return None
    ids.append(_text(data.get("upload_id")))
    upload_ids = tuple(filter(None, ids))
    if kind == COMPLETED and isinstance(data.get("results"), list):
        report_date = _text(data.get("report_date"))
        return LabReport(
            upload_ids=upload_ids, results=tuple((r, report_date) for r in data["results"])
        )
    if kind == FAILED:
        error = data.get("error")
        return LabReport(upload_ids=upload_ids, error=error if isinstance(error, dict) else {})
    return None


def _first_range(ranges) -> dict:
    return _dict(ranges[0]) if isinstance(ranges, list) and ranges else {}


def _layered(result: dict, fallback: date) -> Measurement | None:
    source, biomarker = _dict(result.get("source")), _dict(result.get("biomarker"))
    measurement, interpretation = (
        _dict(result.get("measurement")),
        _dict(result.get("interpretation")),
    )
    name = _text(biomarker.get("display_name")) or _text(source.get("name")) or ""
    # biomarker.key is null when Terra matched nothing: keep the result under its printed name.
    raw_code = _text(biomarker.get("key")) or normalize_key(_text(source.get("name")) or "")
    if not raw_code:
        return None
    kind = measurement.get("type")
    bounded = _dict(measurement.get("bounded"))
    value_text = _text(source.get("value"))
    if kind == "bounded" and value_text is None and _number(bounded.get("value")) is not None:
        value_text = ("<" if bounded.get("operator") == "lt" else ">") + str(bounded["value"])
    elif kind == "qualitative":
        value_text = value_text or _text(_dict(measurement.get("qualitative")).get("text"))
    elif kind == "text":
        value_text = value_text or _text(measurement.get("text"))
    applied = _dict(interpretation.get("applied_range")) or _first_range(
        result.get("reference_ranges")
    )
    return Measurement(
        raw_code=raw_code,
        name=name,
        value=_number(measurement.get("numeric")) if kind == "numeric" else None,
        value_text=value_text,
        unit=_text(measurement.get("units")) or _text(source.get("units")),
        reference_low=_number(applied.get("lower")),
        reference_high=_number(applied.get("upper")),
        status=status_from_flag(interpretation.get("flag")),
        measured_on=_day(source.get("collection_date"))
        or _day(result.get("collection_date"))
        or fallback,
    )


def _flat(result: dict, fallback: date) -> Measurement | None:
    name = _text(result.get("display_name")) or _text(result.get("original_name")) or ""
    raw_code = _text(result.get("biomarker")) or normalize_key(
        _text(result.get("original_name")) or name
    )
    if not raw_code:
        return None
    value_text = _text(result.get("raw_value")) or _text(result.get("qualitative_value"))
    for key, sign in (("value_lt", "<"), ("value_gt", ">")):
        if value_text is None and _number(result.get(key)) is not None:
            value_text = f"{sign}{result[key]}"
    ranges = _first_range(result.get("reference_ranges"))
    return Measurement(
        raw_code=raw_code,
        name=name,
        value=_number(result.get("value")),
        value_text=value_text,
        unit=_text(result.get("display_units")) or _text(result.get("units")),
        reference_low=_number(ranges.get("lower_bound")),
        reference_high=_number(ranges.get("upper_bound")),
        status=status_from_flag(ranges.get("classification")),
        measured_on=_day(result.get("collection_date")) or fallback,
    )


def measurement_from_result(result, *, report_date: str | None, arrived: date):
    """One result in either form → a Measurement, or None when it names no marker at all."""
    if not isinstance(result, dict):
        return None
    fallback = _day(report_date) or arrived
    if isinstance(result.get("biomarker"), dict) or "measurement" in result:
        return _layered(result, fallback)
    return _flat(result, fallback)


def _upload_for(report: LabReport, raw_event) -> LabUpload | None:
    # The webhook stores the upload id in reference_id; the payload is read too so a replayed
    # row recorded by older code still finds its upload.
    candidates = {c for c in (*report.upload_ids, raw_event.reference_id) if c}
    if not candidates:
        return None
    return (
        LabUpload.objects.filter(terra_upload_id__in=candidates)
        .select_related("user")
        .order_by("-created_at")
        .first()
    )


def lab_upload_mark_parse_failed(*, upload: LabUpload, error: dict) -> None:
    previous = upload.terra_response if isinstance(upload.terra_response, dict) else {}
    upload.terra_status = FAILED_PARSE
    upload.terra_response = {**previous, "lab_report_failed": error}
    upload.updated_at = timezone.now()
    upload.save(update_fields=["terra_status", "terra_response", "updated_at"])


def lab_upload_store_results(*, upload: LabUpload, report: LabReport, arrived: date) -> int:
    """Upsert every result as a biomarker of the upload's user, then mark the upload parsed."""
    written = 0
    with transaction.atomic():
        for result, report_date in report.results:
            measurement = measurement_from_result(result, report_date=report_date, arrived=arrived)
            if measurement is None:
                log.info("lab upload %s: result without a marker skipped", upload.pk)
                continue
            biomarker_upsert(
                user_id=upload.user_id,
                source=SOURCE,
                measurement=measurement,
                lab_upload_id=upload.pk,
            )
            written += 1
        now = timezone.now()
        LabUpload.objects.filter(pk=upload.pk).update(
            terra_status=PARSED, parsed_at=now, updated_at=now
        )
    return written


def lab_report_deliver(*, upload: LabUpload, raw_event) -> bool:
    """Hand the report to the upload's live lab-report instance (it stores the biomarkers);
    False when there is none (an upload from before the workflow, or one that timed out),
    and the normalizer stores the report itself as it always did."""
    from workflows import services as workflow_services
    from workflows.models import TERMINAL_STATUSES, WorkflowInstance

    if not upload.instance_id:
        return False
    instance = (
        WorkflowInstance.objects.filter(workflow_name=LAB_WORKFLOW, instance_id=upload.instance_id)
        .exclude(status__in=TERMINAL_STATUSES)
        .first()
    )
    if instance is None:
        return False
    workflow_services.instance_send_event(
        instance=instance, type="lab_report", payload={"raw_event_id": raw_event.pk}
    )
    return True


def lab_upload_store_report(*, upload_id: str, raw_event_id: int) -> str:
    """The lab-report workflow's last step: store the biomarkers of the delivered report (or
    record Terra's parse failure); returns the upload's final status."""
    from ingest.models import RawEvent

    upload = LabUpload.objects.filter(pk=upload_id).first()
    raw_event = RawEvent.objects.filter(pk=raw_event_id).first()
    if upload is None or raw_event is None:  # wiped meanwhile
        return lab_upload_status(upload_id)
    report = lab_report_parse(raw_event.payload)
    if report.failed:
        lab_upload_mark_parse_failed(upload=upload, error=report.error)
    else:
        arrived = timezone.localdate(raw_event.received_at or timezone.now())
        lab_upload_store_results(upload=upload, report=report, arrived=arrived)
    return lab_upload_status(upload_id)


@register("lab_report")
def normalize_lab_report(raw_event) -> NormalizeResult:
    report = lab_report_parse(raw_event.payload)
    if report is None:
        return NormalizeResult(ok=False, error=UNRECOGNIZED)
    upload = _upload_for(report, raw_event)
    if upload is None:
        # Terra may answer before our forward recorded its upload id: parked, the drain retries.
        return NormalizeResult(ok=False, error=NO_UPLOAD)
    raw_event.user_id = upload.user_id  # the consumer stores it: console links, user wipe
    arrived = timezone.localdate(raw_event.received_at or timezone.now())
    if lab_report_deliver(upload=upload, raw_event=raw_event):
        usable = [
            r
            for r, d in report.results
            if measurement_from_result(r, report_date=d, arrived=arrived)
        ]
        return NormalizeResult(ok=True, rows=len(usable))
    if report.failed:
        lab_upload_mark_parse_failed(upload=upload, error=report.error)
        return NormalizeResult(ok=True)
    return NormalizeResult(
        ok=True, rows=lab_upload_store_results(upload=upload, report=report, arrived=arrived)
    )
