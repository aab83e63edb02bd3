"""Cross-cutting tables: operator API keys, user bearer tokens, the audit log, idempotency keys."""

from django.conf import settings
from django.db import models


class ApiKey(models.Model):
    """Operator key sent as X-Admin-Key. Only the sha256 of the key is stored."""

    name = models.CharField(max_length=100, unique=True)
    prefix = models.CharField(max_length=12, help_text="First characters, to recognise a key.")
    key_hash = models.CharField(max_length=64, unique=True)
    scopes = models.JSONField(default=list, help_text='e.g. ["ingest:admin", "workflows:read"]')
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "api_keys"
        verbose_name = "API key"

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class UserToken(models.Model):
    """User bearer token for the user-facing API (Authorization: Bearer ...). Hashed at rest."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, default="default")
    prefix = models.CharField(max_length=12)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "user_tokens"

    def __str__(self):
        return f"{self.user} ({self.prefix}…)"


class AuditLog(models.Model):
    """One row per operator mutation, written by the service that performs it; one row per
    operator, kind of read and user concerned per READ_WINDOW of reads of a user's health data
    (ops.access), its `count` going up with each repeat."""

    actor = models.CharField(
        max_length=200, help_text="api_key:<id>:<name>, user:<username> or system"
    )
    action = models.CharField(max_length=100)
    resource = models.CharField(max_length=300, blank=True)
    result = models.CharField(max_length=50, default="ok")
    ip = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=300, blank=True)
    request_id = models.CharField(max_length=128, blank=True)
    idempotency_key = models.CharField(max_length=255, blank=True)
    deduplicated = models.BooleanField(default=False)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # The user whose data the action read or changed. No database constraint and nothing done
    # on delete: the row outlives a wiped user, still naming them by id (never by name).
    subject = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,  # audit_subject_created serves it
        related_name="+",
        help_text="the user concerned",
    )
    # Reads collapse (ops.access): how many, the last one, and while the row still collects
    # repeats, its key (unique: ops.auditstore's upsert targets it) and when its window ends
    # (epoch seconds of the database's clock).
    count = models.PositiveIntegerField(default=1, db_default=1)
    last_at = models.DateTimeField(null=True, blank=True)
    open_key = models.CharField(max_length=400, null=True, blank=True, unique=True)
    window_end = models.FloatField(null=True, blank=True)

    class Meta:
        db_table = "audit_logs"
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["action", "-created_at"], name="audit_action_created"),
            models.Index(fields=["actor", "-created_at"], name="audit_actor_created"),
            # The console's "user concerned" filter (and a wipe finding rows about a user).
            models.Index(fields=["subject", "-created_at"], name="audit_subject_created"),
        ]

    def __str__(self):
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} {self.resource} {self.result}"


class IdempotencyKey(models.Model):
    """First response to (principal, key, endpoint), replayed for retries with an equal body."""

    principal = models.CharField(max_length=200)
    key = models.CharField(max_length=255)
    endpoint = models.CharField(max_length=300)
    body_hash = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="null while in flight"
    )
    response_body = models.BinaryField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        db_table = "idempotency_keys"
        constraints = [
            models.UniqueConstraint(
                fields=["principal", "key", "endpoint"], name="idempotency_unique_key"
            ),
        ]

    def __str__(self):
        return f"{self.principal} {self.endpoint} {self.key}"


class WorkerHeartbeat(models.Model):
    """One row per long-running process (a qcluster, a `runworkflows`), refreshed every
    HEARTBEAT_SECONDS by ops.liveness; times come from the database's clock so hosts with
    skewed clocks agree on what is stale. last_progress_at is when it last finished work (a
    row, a step boundary), carried by its beats: a process that beats without it is stuck."""

    kind = models.CharField(max_length=32, help_text="cluster | runner")
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    version = models.CharField(max_length=64, blank=True)
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    last_progress_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "worker_heartbeats"
        constraints = [
            # ops.liveness.heartbeat_beat upserts on this: one row per process.
            models.UniqueConstraint(fields=["kind", "host", "pid"], name="heartbeat_process"),
        ]
        # The live list and the forget sweep read by age.
        indexes = [models.Index(fields=["last_seen_at"], name="heartbeat_last_seen")]

    def __str__(self):
        return f"{self.kind} {self.host}:{self.pid}"


class RateCounter(models.Model):
    """One row per limited thing (a throttle's principal, an audit flood key): the hits in its
    current window and when that window ends, in epoch seconds of the database's clock. Only
    ops.ratestore writes it, one atomic statement per hit (ops.throttling)."""

    name = models.CharField(max_length=200, primary_key=True)  # the upsert's conflict target
    hits = models.PositiveIntegerField()
    window_end = models.FloatField()

    class Meta:
        db_table = "rate_counters"
        # ops.ratestore's purge deletes ended windows by this.
        indexes = [models.Index(fields=["window_end"], name="rate_counters_end")]

    def __str__(self):
        return f"{self.name}: {self.hits}"


class OutboundPacer(models.Model):
    """One row per paced destination (ops.pacing): the earliest time, in epoch seconds of the
    database's clock, at which the next call may be made. Written only by ops.ratestore."""

    name = models.CharField(max_length=200, primary_key=True)  # the upsert's conflict target
    next_at = models.FloatField()

    class Meta:
        db_table = "outbound_pacers"

    def __str__(self):
        return f"{self.name}: {self.next_at}"


class BulkJob(models.Model):
    """One operator action over every row a filter matches (replay every dead sleep event since
    02:00; restart every errored lab-report of the last hour), run in chunks by ops.bulk with
    its progress stored here, so a page shows done/total while it runs. Its one audit row
    (audit_id) is written when it is asked for and completed with the counts when it ends."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        FINISHED = "finished"
        FAILED = "failed"  # the run itself broke (the error says how); rows done so far stay done

    kind = models.CharField(max_length=100, help_text="e.g. raw_events.replay")
    filter = models.JSONField(default=dict, blank=True, help_text="the filter that chose the rows")
    total = models.PositiveIntegerField(default=0, help_text="rows the filter matched when asked")
    done = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    actor = models.CharField(max_length=200)
    # Rows are walked in id order up to the largest id matched when asked (rows that arrive
    # later are not part of the job); cursor is the last id handled, so a run that stopped
    # goes on after it.
    high_water = models.BigIntegerField(default=0)
    cursor = models.BigIntegerField(default=0)
    audit_id = models.BigIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    # When a run last claimed it or stored a chunk: a running job whose time is long past lost
    # its process, and the next delivery of its task takes it over (ops.bulk).
    progress_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "bulk_jobs"
        ordering = ["-id"]
        constraints = [
            # ops.bulk's claim (queued → running) and finish compare-and-set on these states.
            models.CheckConstraint(
                condition=models.Q(state__in=["queued", "running", "finished", "failed"]),
                name="bulk_job_state_valid",
            ),
        ]

    def __str__(self):
        return f"bulk job {self.pk} {self.kind} {self.done + self.failed}/{self.total}"

    @property
    def handled(self) -> int:
        return self.done + self.failed
