"""Ingest tables: raw webhook deliveries, Terra connections, the typed tables they normalize into,
trace rows that follow one delivery end to end, and backfill imports."""

import json

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from ingest.terra.payload import Unparseable, payload_parse


class RawEventState(models.TextChoices):
    PENDING = "pending"  # inserted, awaiting the consumer
    PROCESSED = "processed"  # normalized (processed_at set, no error)
    SKIPPED = "skipped"  # acknowledged on purpose (processed_at set, error "skipped:<reason>")
    PARKED = "parked"  # normalizer said not ok; the drain retries it for 24 h
    RETRYING = "retrying"  # normalizer raised; retried with backoff (next_attempt_at)
    DEAD = "dead"  # raised 5 times: manual triage


class RawEvent(models.Model):
    """One Terra delivery as received. `state` names the row's place in the consumer state
    machine (ingest.decisions); processed_at/process_error carry the same facts in the spec's terms."""

    event_type = models.CharField(max_length=64)
    # "" (never NULL) when the delivery names no Terra user (lab reports): a NULL would make
    # the unique constraint below let duplicates through on both databases.
    terra_user_id = models.CharField(max_length=255, blank=True, default="")
    reference_id = models.CharField(max_length=255, blank=True, default="")
    provider = models.CharField(max_length=64, blank=True, default="")
    # The delivery's exact bytes: sha256(body) == dedup_key, so a row can be checked against what
    # Terra signed, and a body that is not JSON is kept too (skipped:unparseable:<reason>).
    body = models.BinaryField()
    signature_verified = models.BooleanField(default=False)
    dedup_key = models.CharField(max_length=64, help_text="sha256 hex of the raw body")
    request_id = models.CharField(max_length=128, blank=True, default="")
    received_at = models.DateTimeField(default=timezone.now)
    # When Terra emitted the delivery (X-Terra-Ordering-Timestamp, unix ms, unchanged across its
    # retries), else received_at. Newer ordering wins per record; replays keep it.
    ordered_at = models.DateTimeField(default=timezone.now)
    processed_at = models.DateTimeField(null=True, blank=True)
    process_error = models.TextField(null=True, blank=True)
    # The last raised error's bounded traceback (ops.tracebacks): frames only, never local values
    # (health data). Written with the outcome; cleared by any outcome that did not raise.
    process_traceback = models.TextField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    state = models.CharField(
        max_length=16, choices=RawEventState.choices, default=RawEventState.PENDING
    )
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="raw_events",
    )
    # Items of `data` its earlier pieces committed (a big delivery is normalized in pieces that
    # each commit): the next attempt after a failure starts after them (ingest.consumer).
    progress = models.PositiveIntegerField(default=0, db_default=0)
    # The webhook span's W3C traceparent when OpenTelemetry records (ops.tracing): the consumer's
    # span links to it. "" otherwise.
    traceparent = models.CharField(max_length=55, blank=True, default="", db_default="")

    class Meta:
        db_table = "raw_events"
        constraints = [
            # The webhook's dedup: a duplicate delivery hits this and is acknowledged, not queued.
            models.UniqueConstraint(
                fields=["event_type", "terra_user_id", "dedup_key"], name="raw_events_dedup"
            ),
            models.CheckConstraint(
                condition=Q(state__in=RawEventState.values), name="raw_events_state_valid"
            ),
        ]
        indexes = [
            # The drain and the DLQ read only unfinished rows; this keeps them off the big tail.
            models.Index(
                fields=["state", "received_at"],
                condition=Q(state__in=["pending", "parked", "retrying", "dead"]),
                name="raw_events_unfinished",
            ),
            # Rows due again (retries, parked backoff, expired leases): the due poller and the
            # consumer's batch claim read them first, every second.
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(
                    state__in=["pending", "parked", "retrying"], next_attempt_at__isnull=False
                ),
                name="raw_events_due",
            ),
            models.Index(fields=["request_id"], name="raw_events_request_id"),
            # The user overview, the wipe and lab-report lookups match deliveries by reference_id.
            models.Index(fields=["reference_id"], name="raw_events_reference_id"),
            models.Index(fields=["terra_user_id", "state"], name="raw_events_terra_user"),
            models.Index(fields=["received_at"], name="raw_events_received"),
        ]

    def __str__(self):
        return (
            f"#{self.pk} {self.event_type} {self.terra_user_id or self.reference_id} [{self.state}]"
        )

    @property
    def payload(self) -> dict | None:
        """The JSON object parsed from `body` (once per body), or None when it is unparseable."""
        body = self.body
        cached = self.__dict__.get("_payload_cache")
        if cached is None or cached[0] is not body:
            try:
                parsed = payload_parse(body)
            except Unparseable:
                parsed = None
            cached = self.__dict__["_payload_cache"] = (body, parsed)
        return cached[1]

    def payload_provide(self, parsed: dict) -> None:
        """Serve `parsed` as the payload of the body as it is now (the consumer's stream parse
        of a big body, which it leaves unloaded: only what its normalizer reads)."""
        self.__dict__["_payload_cache"] = (self.body, parsed)

    @payload.setter
    def payload(self, value) -> None:
        """Tests, fixtures and the simulator build rows from a dict: store its compact JSON."""
        self.body = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


class TerraConnection(models.Model):
    """A user's link to one wearable provider through Terra (auth webhook / subscriptions)."""

    # No index of its own: terra_conn_user (user, deactivated_at) serves user lookups.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="terra_connections",
        db_index=False,
    )
    terra_user_id = models.CharField(max_length=255, unique=True)
    provider = models.CharField(max_length=64)
    reference_id = models.CharField(max_length=255, blank=True, default="")
    scopes = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    deactivated_at = models.DateTimeField(null=True, blank=True)
    last_webhook_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "terra_connections"
        indexes = [models.Index(fields=["user", "deactivated_at"], name="terra_conn_user")]

    def __str__(self):
        state = "active" if self.deactivated_at is None else "inactive"
        return f"{self.user} · {self.provider} · {self.terra_user_id} ({state})"

    @property
    def is_active(self) -> bool:
        return self.deactivated_at is None


class TypedRow(models.Model):
    """Common columns of the normalized tables; `updated_at` drives /v1/sync."""

    # No index of its own: every typed table's unique record key and its (user, updated_at)
    # sync index start with user, so a per-user index would only cost each row an entry.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    source = models.CharField(max_length=64, help_text="provider lower-cased, e.g. garmin")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True


class DailySummary(TypedRow):
    date = models.DateField()
    steps = models.IntegerField(null=True, blank=True)
    distance_meters = models.FloatField(null=True, blank=True)
    total_burned_calories = models.FloatField(null=True, blank=True)
    resting_heart_rate = models.FloatField(null=True, blank=True)
    heart_rate_variability = models.FloatField(null=True, blank=True)
    fatburn_active_zone_minutes = models.FloatField(null=True, blank=True)
    cardio_active_zone_minutes = models.FloatField(null=True, blank=True)
    peak_active_zone_minutes = models.FloatField(null=True, blank=True)
    active_zone_minutes = models.FloatField(null=True, blank=True)
    stress_management_score = models.FloatField(null=True, blank=True)
    strain = models.FloatField(null=True, blank=True)
    recovery_score = models.FloatField(null=True, blank=True)
    sleep_score = models.FloatField(null=True, blank=True)
    sleep_minutes = models.FloatField(null=True, blank=True)
    deep_sleep_minutes = models.FloatField(null=True, blank=True)
    rem_sleep_minutes = models.FloatField(null=True, blank=True)
    light_sleep_minutes = models.FloatField(null=True, blank=True)
    awake_minutes = models.FloatField(null=True, blank=True)
    deep_sleep_percent = models.FloatField(null=True, blank=True)
    rem_sleep_percent = models.FloatField(null=True, blank=True)
    light_sleep_percent = models.FloatField(null=True, blank=True)
    awake_percent = models.FloatField(null=True, blank=True)
    bed_time = models.DateTimeField(null=True, blank=True)
    wake_up_time = models.DateTimeField(null=True, blank=True)
    spo2 = models.FloatField(null=True, blank=True)
    respiratory_rate = models.FloatField(null=True, blank=True)
    skin_temperature = models.FloatField(null=True, blank=True)
    # How the row was merged (ingest/daily_merge.py): the ordering time of the daily delivery
    # that last wrote the daily columns, the sleep session the sleep columns come from, and each
    # feeder's own value of the columns several event types feed ({"daily": {...}, "sleep":
    # {...}}), from which those columns are recomputed by a fixed precedence.
    daily_ordered_at = models.DateTimeField(null=True, blank=True)
    sleep_record_key = models.CharField(max_length=255, blank=True, default="")
    feeds = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "daily_summary"
        verbose_name_plural = "daily summaries"
        constraints = [
            models.UniqueConstraint(
                fields=["user", "source", "date"], name="daily_summary_unique_day"
            )
        ]
        indexes = [models.Index(fields=["user", "updated_at"], name="daily_summary_sync")]

    def __str__(self):
        return f"{self.user} {self.source} {self.date}"


class SleepSession(TypedRow):
    # Terra's metadata.summary_id, or "start:<UTC ISO start>" when the payload has none: a
    # revision with the same summary_id updates this row even when its start moved.
    record_key = models.CharField(max_length=255)
    # The ordering time of the delivery that last wrote the row (newest wins).
    ordered_at = models.DateTimeField(null=True, blank=True)
    start_time = models.DateTimeField()
    # The calendar date written in metadata.end_time: the daily_summary row it feeds.
    wake_date = models.DateField(null=True, blank=True)
    end_time = models.DateTimeField(null=True, blank=True)
    is_nap = models.BooleanField(null=True, blank=True)
    sleep_minutes = models.FloatField(null=True, blank=True)
    deep_sleep_minutes = models.FloatField(null=True, blank=True)
    rem_sleep_minutes = models.FloatField(null=True, blank=True)
    light_sleep_minutes = models.FloatField(null=True, blank=True)
    awake_minutes = models.FloatField(null=True, blank=True)
    sleep_efficiency = models.FloatField(null=True, blank=True)
    resting_heart_rate = models.FloatField(null=True, blank=True)
    heart_rate_variability = models.FloatField(null=True, blank=True)
    spo2 = models.FloatField(null=True, blank=True)
    respiratory_rate = models.FloatField(null=True, blank=True)
    skin_temperature = models.FloatField(null=True, blank=True)
    sleep_score = models.FloatField(null=True, blank=True)
    recovery_score = models.FloatField(null=True, blank=True)
    raw = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "sleep_sessions"
        constraints = [
            models.UniqueConstraint(
                fields=["user", "source", "record_key"], name="sleep_sessions_record"
            )
        ]
        indexes = [
            models.Index(fields=["user", "updated_at"], name="sleep_sessions_sync"),
            # The daily merge picks the night's session among those waking on one date.
            models.Index(fields=["user", "source", "wake_date"], name="sleep_sessions_wake"),
        ]

    def __str__(self):
        return f"{self.user} {self.source} sleep {self.start_time:%Y-%m-%d %H:%M}"


class Activity(TypedRow):
    # Terra's metadata.summary_id, or "start:<UTC ISO start>" when the payload has none.
    record_key = models.CharField(max_length=255)
    # The ordering time of the delivery that last wrote the row (newest wins).
    ordered_at = models.DateTimeField(null=True, blank=True)
    start_time = models.DateTimeField()
    end_time = models.DateTimeField(null=True, blank=True)
    name = models.CharField(max_length=255, blank=True, null=True)
    activity_type = models.IntegerField(
        null=True, blank=True, help_text="Terra activity code; 0 is a real code"
    )
    duration_seconds = models.FloatField(null=True, blank=True)
    calories = models.FloatField(null=True, blank=True)
    distance_meters = models.FloatField(null=True, blank=True)
    average_heart_rate = models.FloatField(null=True, blank=True)
    raw = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "activities"
        verbose_name_plural = "activities"
        constraints = [
            models.UniqueConstraint(
                fields=["user", "source", "record_key"], name="activities_record"
            )
        ]
        indexes = [models.Index(fields=["user", "updated_at"], name="activities_sync")]

    def __str__(self):
        return f"{self.user} {self.source} {self.name or self.activity_type} {self.start_time:%Y-%m-%d %H:%M}"


class TraceLevel(models.TextChoices):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class TraceEvent(models.Model):
    """One step of a delivery's journey (webhook_received, queue_published, normalized, …)."""

    request_id = models.CharField(max_length=128, blank=True, default="")
    # No indexes of their own: trace_raw_event and trace_user below start with them.
    raw_event = models.ForeignKey(
        RawEvent,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="traces",
        db_index=False,
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        db_index=False,
    )
    level = models.CharField(max_length=10, choices=TraceLevel.choices, default=TraceLevel.INFO)
    event = models.CharField(max_length=64)
    duration_ms = models.FloatField(null=True, blank=True)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "trace_events"
        indexes = [
            models.Index(fields=["request_id", "created_at"], name="trace_request"),
            models.Index(fields=["raw_event", "created_at"], name="trace_raw_event"),
            models.Index(fields=["user", "created_at"], name="trace_user"),
            models.Index(fields=["created_at"], name="trace_created"),
        ]

    def __str__(self):
        return f"{self.created_at:%H:%M:%S} {self.level} {self.event} {self.request_id}"


class ImportJob(models.Model):
    """A user's historical import (POST /v1/import): what was asked of Terra and how far it got."""

    # No index of its own: import_jobs_user (user, created_at) serves it.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="import_jobs",
        db_index=False,
    )
    days = models.PositiveIntegerField()
    start_date = models.DateField()
    end_date = models.DateField()
    requested = models.JSONField(
        default=list, help_text="one entry per connection × type with Terra's answer"
    )
    chunks_received = models.PositiveIntegerField(default=0)
    rows_normalized = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "import_jobs"
        indexes = [models.Index(fields=["user", "-created_at"], name="import_jobs_user")]

    def __str__(self):
        return f"import {self.user} {self.start_date}…{self.end_date}"


class RawEventUpload(models.Model):
    """A big delivery body staged by COPY for the one statement that inserts its row
    (ingest.store.deliveries, PostgreSQL): it lives only inside that delivery's transaction."""

    token = models.UUIDField(unique=True)
    body = models.BinaryField()

    class Meta:
        db_table = "raw_event_uploads"

    def __str__(self):
        return f"upload {self.token}"


class DownloadSlot(models.Model):
    """One download at a time per bucket host (s3_payload pings): a slow or hostile bucket holds
    at most one worker, for at most the download deadline (held_until)."""

    host = models.CharField(max_length=255, unique=True)
    held_until = models.DateTimeField()

    class Meta:
        db_table = "ingest_download_slots"

    def __str__(self):
        return f"{self.host} until {self.held_until:%H:%M:%S}"


class ConsumeTicket(models.Model):
    """A consume task queued on the ORM broker and not started yet (ingest.queue): deliveries
    that find one join it instead of queueing a task each, so one task drains many rows."""

    created_at = models.DateTimeField()

    class Meta:
        db_table = "ingest_consume_tickets"

    def __str__(self):
        return f"ticket {self.pk} {self.created_at:%H:%M:%S}"


class WipedReference(models.Model):
    """A Terra user id or a lab upload reference of a wiped user, hashed (ingest.wipe): deliveries
    that still arrive for it are stored and skipped (`skipped:wiped_user`), not parked waiting
    for a user who will never come back. Only the digest is kept, never the id."""

    digest = models.CharField(max_length=64, unique=True)  # the consumer's lookup
    created_at = models.DateTimeField(default=timezone.now, db_index=True)  # the clean-up's

    class Meta:
        db_table = "ingest_wiped_references"

    def __str__(self):
        return f"wiped {self.digest[:12]}…"
