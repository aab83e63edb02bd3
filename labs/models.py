"""Lab uploads and biomarkers (the long table; the wide view is built from it)."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from labs.aliases import CANONICAL_CODES, WIDE_CODES


class LabUpload(models.Model):
    """A stored lab report and its journey through Terra's OCR.

    terra_status: pending → submitted | failed:<http status> | failed:network → parsed
    (or failed:parse when Terra's lab_report.failed webhook arrives, failed:timeout when it
    does not arrive within LAB_REPORT_TIMEOUT)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index of its own: lab_uploads_user (user, created_at) serves it.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="lab_uploads",
        db_index=False,
    )
    storage_key = models.CharField(max_length=500)
    original_name = models.CharField(max_length=255, blank=True, default="")
    content_type = models.CharField(max_length=100)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)  # of the stored bytes (what was forwarded)
    # Kinds of metadata taken out of the file before it was stored and forwarded
    # (labs.screening: "exif", "xmp", "tEXt", …); [] when it had none, or for a PDF.
    metadata_removed = models.JSONField(default=list, blank=True)
    terra_status = models.CharField(max_length=64, default="pending")
    terra_response = models.JSONField(null=True, blank=True)
    terra_upload_id = models.CharField(max_length=255, null=True, blank=True)
    parsed_at = models.DateTimeField(null=True, blank=True)
    # The `lab-report` workflow instance driving this upload (labs/workflows.py); "" for
    # uploads made before the round trip became a workflow.
    instance_id = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "lab_uploads"
        indexes = [
            models.Index(fields=["user", "-created_at"], name="lab_uploads_user"),
            models.Index(fields=["user", "updated_at"], name="lab_uploads_sync"),
            models.Index(fields=["terra_upload_id"], name="lab_uploads_terra_id"),
        ]

    def __str__(self):
        return f"{self.user} {self.original_name or self.id} [{self.terra_status}]"


class BiomarkerStatus(models.TextChoices):
    OPTIMAL = "optimal"
    BORDERLINE = "borderline"
    OUT_OF_RANGE = "out_of_range"


class Biomarker(models.Model):
    # No index of its own: biomarkers_unique and the other user indexes start with user.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="biomarkers",
        db_index=False,
    )
    source = models.CharField(max_length=64, help_text="terra_lab, or <provider>_body")
    code = models.CharField(max_length=100, help_text="canonical code (raw code when unmapped)")
    raw_code = models.CharField(max_length=100, blank=True, default="")
    name = models.CharField(max_length=255, blank=True, default="")
    value = models.FloatField(null=True, blank=True)
    value_text = models.CharField(max_length=255, null=True, blank=True)
    unit = models.CharField(max_length=50, null=True, blank=True)
    reference_low = models.FloatField(null=True, blank=True)
    reference_high = models.FloatField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=BiomarkerStatus.choices, null=True, blank=True)
    measured_on = models.DateField()
    lab_upload = models.ForeignKey(
        LabUpload, null=True, blank=True, on_delete=models.SET_NULL, related_name="biomarkers"
    )
    # Body deliveries: the ordering time of the delivery that last wrote the row (newest wins,
    # docs/ingest.md). Lab reports leave it null.
    ordered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "biomarkers"
        constraints = [
            models.UniqueConstraint(
                fields=["user", "source", "code", "measured_on"], name="biomarkers_unique"
            ),
            models.CheckConstraint(
                condition=Q(status__isnull=True) | Q(status__in=BiomarkerStatus.values),
                name="biomarkers_status_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["user", "updated_at"], name="biomarkers_sync"),
            models.Index(fields=["user", "code", "measured_on"], name="biomarkers_user_code"),
        ]

    def __str__(self):
        return f"{self.user} {self.code}={self.value if self.value is not None else self.value_text} {self.measured_on}"


class BiomarkerWide(models.Model):
    """Read-only model over the `biomarkers_wide` view (labs/wide.py, migration 0002): one row per
    (user, date), one nullable float column per canonical code (added below from WIDE_CODES)."""

    id = models.BigIntegerField(primary_key=True, help_text="user_id * 10^8 + YYYYMMDD")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    date = models.DateField()
    updated_at = models.DateTimeField(help_text="newest updated_at of the day's biomarkers")

    class Meta:
        managed = False
        db_table = "biomarkers_wide"
        verbose_name = "biomarkers (wide)"
        verbose_name_plural = "biomarkers (wide)"

    def __str__(self):
        return f"{self.user_id} {self.date}"


for _code in WIDE_CODES:
    BiomarkerWide.add_to_class(
        _code, models.FloatField(null=True, blank=True, verbose_name=CANONICAL_CODES[_code])
    )
