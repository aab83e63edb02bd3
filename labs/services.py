"""Lab uploads: store a validated file, record it, forward it to Terra, retry failed forwards;
and the read selectors the API and the console share."""

import hashlib
import logging
import re
import uuid

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from ingest.terra.client import TerraError, TerraNetworkError, get_terra_client
from labs import filetype
from labs.errors import UnsupportedFileType
from labs.models import LabUpload
from labs.screening import lab_file_screen
from ops.services import audit_log_write

log = logging.getLogger(__name__)

STORAGE_PREFIX = "lab-uploads"
PENDING = "pending"
SUBMITTED = "submitted"
PARSED = "parsed"
FAILED_NETWORK = "failed:network"
FAILED_PARSE = "failed:parse"
FAILED_TIMEOUT = "failed:timeout"
LAB_WORKFLOW = "lab-report"  # labs/workflows.py
DELETED = "deleted"  # the lab-report workflow's outcome for an upload wiped under it
# Forwarding failures the console may retry; failed:parse is Terra's verdict on the file itself.
RETRYABLE_PREFIX = "failed:"


def _user_segment(user) -> str:
    # Usernames may be "." or ".." (Django's validator allows dots); those would climb a level.
    name = user.get_username()
    if name in (".", "..") or not re.fullmatch(r"[\w.@+-]+", name):
        return f"user-{user.pk}"
    return name


def storage_key_for(*, user, upload_id: uuid.UUID, kind: filetype.FileKind) -> str:
    """The client's file name never appears here: only names we chose."""
    return f"{STORAGE_PREFIX}/{_user_segment(user)}/{upload_id}.{kind.extension}"


def _read(uploaded: UploadedFile) -> bytes:
    # At most LAB_UPLOAD_MAX_BYTES (labs.upload refused anything larger before we get here).
    return b"".join(uploaded.chunks())


def lab_upload_create(*, user, uploaded: UploadedFile) -> tuple[LabUpload, bytes]:
    """Screen the file (labs.screening: metadata stripped, bombs refused), store what passed under
    a key we choose and insert its row (terra_status pending). Returns the row and the stored
    bytes, which are what the forward sends."""
    uploaded.seek(0)
    kind = filetype.sniff(uploaded.read(filetype.HEAD_BYTES))
    if kind is None:
        raise UnsupportedFileType(
            "Only PDF, PNG and JPEG lab reports are accepted (decided by the file's content).",
        )
    uploaded.seek(0)
    screened = lab_file_screen(content=_read(uploaded), kind=kind)
    content = screened.content
    upload_id = uuid.uuid4()
    key = default_storage.save(
        storage_key_for(user=user, upload_id=upload_id, kind=kind), ContentFile(content)
    )
    try:
        row = LabUpload.objects.create(
            id=upload_id,
            user=user,
            storage_key=key,
            original_name=(uploaded.name or "")[:255],
            content_type=kind.content_type,
            size=len(content),
            sha256=hashlib.sha256(content).hexdigest(),
            metadata_removed=screened.metadata_removed,
            terra_status=PENDING,
        )
    except Exception:
        default_storage.delete(key)  # no orphan file when the row cannot be written
        raise
    return row, content


def lab_upload_forward(*, upload: LabUpload, content: bytes | None = None) -> LabUpload:
    """POST the file to Terra and record the outcome on the row: submitted (+ Terra's upload id),
    failed:<http status> or failed:network. Never raises for Terra's answer."""
    if content is None:
        with default_storage.open(upload.storage_key, "rb") as stored:
            content = stored.read()
    client = get_terra_client()
    try:
        body = client.upload_lab_report(
            reference_id=upload.user.get_username(),
            filename=upload.storage_key.rsplit("/", 1)[-1],
            content=content,
            content_type=upload.content_type,
        )
    except TerraError as exc:
        log.warning("terra refused lab upload %s: %s", upload.pk, exc)
        status, response, terra_id = f"failed:{exc.status}", exc.body, upload.terra_upload_id
    except TerraNetworkError as exc:
        log.warning("terra unreachable for lab upload %s: %s", upload.pk, exc)
        status, response, terra_id = FAILED_NETWORK, {"error": str(exc)}, upload.terra_upload_id
    else:
        terra_id = body.get("upload_id") if isinstance(body, dict) else None
        status, response = SUBMITTED, body
    upload.terra_status = status
    upload.terra_response = response
    upload.terra_upload_id = terra_id
    upload.updated_at = timezone.now()
    upload.save(update_fields=["terra_status", "terra_response", "terra_upload_id", "updated_at"])
    return upload


def lab_upload_receive(*, user, uploaded: UploadedFile) -> LabUpload:
    """The upload endpoint's whole job: store the file, then insert its row and its `lab-report`
    workflow instance in one transaction (labs/workflows.py forwards it to Terra and waits for
    the report), so there is never an upload without the instance that drives it."""
    from workflows import services as workflow_services

    with transaction.atomic():
        row, _ = lab_upload_create(user=user, uploaded=uploaded)
        row.instance_id = lab_instance_id(row.pk)
        row.save(update_fields=["instance_id"])
        workflow_services.instance_create(
            workflow_name=LAB_WORKFLOW,
            instance_id=row.instance_id,
            params={"upload_id": str(row.pk)},
            subject=user,
        )
    return row


def lab_instance_id(upload_id) -> str:
    return f"lab-{upload_id}"


class TerraForwardFailed(Exception):
    """A forward attempt that may succeed later (network error, 5xx); str() is the status the
    upload gets if every retry fails."""


def _record_attempt(upload: LabUpload, **changes) -> None:
    for field, value in {**changes, "updated_at": timezone.now()}.items():
        setattr(upload, field, value)
    upload.save(update_fields=[*changes, "updated_at"])


def lab_upload_forward_attempt(*, upload_id: str) -> dict:
    """One attempt of the lab-report workflow's forward step. The upload stays `pending` while
    attempts fail (so the console's retry action leaves it to the workflow); Terra's last
    answer is kept in terra_response. 4xx → NonRetryableError("failed:<status>")."""
    from workflows import NonRetryableError

    upload = LabUpload.objects.select_related("user").filter(pk=upload_id).first()
    if upload is None:  # wiped with its user meanwhile: nothing to forward
        raise NonRetryableError(DELETED)
    if upload.terra_status != PENDING:  # an earlier attempt got through before a crash
        return {"terra_status": upload.terra_status, "terra_upload_id": upload.terra_upload_id}
    with default_storage.open(upload.storage_key, "rb") as stored:
        content = stored.read()
    try:
        body = get_terra_client().upload_lab_report(
            reference_id=upload.user.get_username(),
            filename=upload.storage_key.rsplit("/", 1)[-1],
            content=content,
            content_type=upload.content_type,
        )
    except TerraError as exc:
        log.warning("terra refused lab upload %s: %s", upload.pk, exc)
        _record_attempt(upload, terra_response=exc.body)
        if 400 <= exc.status < 500:
            raise NonRetryableError(f"failed:{exc.status}") from None
        raise TerraForwardFailed(f"failed:{exc.status}") from None
    except TerraNetworkError as exc:
        log.warning("terra unreachable for lab upload %s: %s", upload.pk, exc)
        _record_attempt(upload, terra_response={"error": str(exc)})
        raise TerraForwardFailed(FAILED_NETWORK) from None
    terra_id = body.get("upload_id") if isinstance(body, dict) else None
    _record_attempt(upload, terra_status=SUBMITTED, terra_response=body, terra_upload_id=terra_id)
    return {"terra_status": SUBMITTED, "terra_upload_id": terra_id}


def lab_upload_set_status(*, upload_id: str, status: str, only_from: tuple[str, ...]) -> str:
    """Set terra_status when it is one of `only_from`; returns the upload's status after."""
    LabUpload.objects.filter(pk=upload_id, terra_status__in=only_from).update(
        terra_status=status, updated_at=timezone.now()
    )
    return lab_upload_status(upload_id)


def lab_upload_status(upload_id: str) -> str:
    found = LabUpload.objects.filter(pk=upload_id).values_list("terra_status", flat=True).first()
    return DELETED if found is None else found


def is_forward_failed(upload: LabUpload) -> bool:
    return upload.terra_status.startswith(RETRYABLE_PREFIX) and upload.terra_status != FAILED_PARSE


def lab_uploads_retry_forwarding(*, uploads, request=None) -> dict[str, int]:
    """Console action: forward again every upload whose forward failed (others are left alone).
    Each upload is claimed by a compare-and-set back to pending first, so two operators retrying
    at once forward it once. One audit row per retried upload. Returns counts by outcome."""
    counts = {"retried": 0, "submitted": 0, "failed": 0, "ignored": 0}
    for upload in uploads:
        before = upload.terra_status
        claimed = (
            is_forward_failed(upload)
            and LabUpload.objects.filter(pk=upload.pk, terra_status=before).update(
                terra_status=PENDING, updated_at=timezone.now()
            )
            == 1
        )
        if not claimed:
            counts["ignored"] += 1
            continue
        lab_upload_forward(upload=upload)
        counts["retried"] += 1
        counts["submitted" if upload.terra_status == SUBMITTED else "failed"] += 1
        audit_log_write(
            action="lab_upload.retry_forwarding",
            resource=f"lab_upload:{upload.pk}",
            result=upload.terra_status,
            request=request,
            subject=upload.user_id,
            metadata={"before": before, "terra_upload_id": upload.terra_upload_id},
        )
    return counts


# --- selectors -------------------------------------------------------------------------------


def lab_uploads_for(*, user) -> QuerySet[LabUpload]:
    return LabUpload.objects.filter(user=user).order_by("-created_at")
