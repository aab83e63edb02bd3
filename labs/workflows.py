"""The `lab-report` workflow: one lab upload's round trip through Terra as a durable instance.

Instance id `lab-<upload id>`, created in the upload's own transaction (labs.services):

1. forward the stored file to Terra — network errors and 5xx are retried with backoff, a 4xx
   fails at once (`failed:<status>`), retries running out leave the last failure's status;
2. wait for the `lab_report` event the lab_report normalizer sends when Terra's webhook
   arrives (LAB_REPORT_TIMEOUT, default 2 hours → `failed:timeout`);
3. store the biomarkers and mark the upload `parsed` (or `failed:parse` when Terra says so).

Every business outcome ends the instance `complete` with `{"status": <the upload's final
terra_status>}`; `errored` is left for engine-level failures.
"""

from django.conf import settings

from labs import services
from labs.normalizers.lab_report import lab_upload_store_report
from workflows import WaitForEventTimeout, workflow

EVENT = "lab_report"
FORWARD_RETRIES = {"limit": 5, "delay": "10 seconds", "backoff": "exponential"}


@workflow(name=services.LAB_WORKFLOW)
def lab_report(event, step):
    upload_id = event.payload["upload_id"]
    try:
        step.do(
            "forward to terra",
            lambda: services.lab_upload_forward_attempt(upload_id=upload_id),
            retries=FORWARD_RETRIES,
            timeout="2 minutes",
        )
    except Exception as exc:  # refused (4xx) or every retry failed: the message is the status
        failed = str(exc) if str(exc).startswith("failed:") else services.FAILED_NETWORK
        return {"status": _set(step, "mark forward failed", upload_id, failed, services.PENDING)}
    try:
        report = step.wait_for_event("lab report", type=EVENT, timeout=settings.LAB_REPORT_TIMEOUT)
    except WaitForEventTimeout:
        timed_out = services.FAILED_TIMEOUT
        return {"status": _set(step, "mark timed out", upload_id, timed_out, services.SUBMITTED)}
    status = step.do(
        "store biomarkers",
        lambda: lab_upload_store_report(
            upload_id=upload_id, raw_event_id=report.payload["raw_event_id"]
        ),
    )
    return {"status": status}


def _set(step, name: str, upload_id: str, status: str, only_from: str) -> str:
    return step.do(
        name,
        lambda: services.lab_upload_set_status(
            upload_id=upload_id, status=status, only_from=(only_from,)
        ),
    )
