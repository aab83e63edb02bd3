"""Storage for the engine: instances, their steps, events, the durable task queue, logs, and the
active-version pointer per workflow. Timestamps are written from workflows.runtime, never
auto_now, so tests control time."""

from django.conf import settings
from django.db import models
from django.db.models import Q


class Status(models.TextChoices):
    ACTIVE = "active"
    WAITING = "waiting"
    PAUSED = "paused"
    ERRORED = "errored"
    TERMINATED = "terminated"
    COMPLETE = "complete"


TERMINAL_STATUSES = (Status.ERRORED, Status.TERMINATED, Status.COMPLETE)


class StepType(models.TextChoices):
    DO = "do"
    SLEEP = "sleep"
    WAIT_FOR_EVENT = "wait_for_event"
    # Composition: rows that remember what a whole construct decided, so a replay
    # returns it without re-entering the branches / iterations / child.
    PARALLEL = "parallel"
    RACE = "race"
    LOOP = "loop"
    CHILD = "child"


class StepStatus(models.TextChoices):
    RUNNING = "running"  # an attempt started (and may still be running or have crashed)
    RETRYING = "retrying"  # an attempt failed; next_retry_at says when the next one may start
    SLEEPING = "sleeping"
    WAITING = "waiting"  # for an event, until wake_at
    COMPLETE = "complete"
    ERRORED = "errored"  # retries exhausted or non-retryable; replay re-raises the error
    TIMED_OUT = "timed_out"  # wait_for_event gave up; replay re-raises WaitForEventTimeout
    CANCELLED = "cancelled"  # a race's loser: its pending sleep/wait/retry was cleared
    LOOPING = "looping"  # a loop in progress: result holds the last committed state


class TaskKind(models.TextChoices):
    START = "start"
    RESUME = "resume"
    WAKE = "wake"
    RETRY = "retry"
    EVENT = "event"


# Instance priority (create(..., priority=p)): 0-9, higher runs first among new runs.
PRIORITY_MIN, PRIORITY_MAX, DEFAULT_PRIORITY = 0, 9, 5


def start_priority(priority: int) -> int:
    """The task priority of a new run: 10 - p, so p=9 sorts first (1) and p=0 last (10);
    every value stays above 0, the rank of resumes/wakes/retries/events."""
    return 10 - priority


# Claims take lower priority first: resume/wake/retry/event work before new runs.
TASK_PRIORITY = {
    TaskKind.RESUME: 0,
    TaskKind.WAKE: 0,
    TaskKind.RETRY: 0,
    TaskKind.EVENT: 0,
    TaskKind.START: start_priority(DEFAULT_PRIORITY),
}


class WorkflowDeployment(models.Model):
    """Which registered version new instances of a workflow run (the active-version pointer)."""

    workflow_name = models.CharField(max_length=64, unique=True)
    active_version = models.PositiveIntegerField(null=True, blank=True)  # None = deactivated
    # Disabled (workflows.rollout): every road to a new instance refuses it with 409 `disabled`
    # (the one-statement create in engine/store.py reads it too); running instances go on.
    disabled = models.BooleanField(default=False, db_default=False)
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "workflow_deployment"

    def __str__(self):
        return f"{self.workflow_name} v{self.active_version}"


class WorkflowInstance(models.Model):
    workflow_name = models.CharField(max_length=64)
    instance_id = models.CharField(max_length=100)
    version = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    run_number = models.PositiveIntegerField(default=1)
    params = models.JSONField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)  # {"name", "message"}
    request_id = models.CharField(max_length=128, blank=True, default="")
    priority = models.PositiveSmallIntegerField(default=DEFAULT_PRIORITY)
    # sha256 of the workflow function's source when the current run started (engine/
    # code_changes.py warns when a resume runs other code); "" until the run first executes.
    code_fingerprint = models.CharField(max_length=64, blank=True, default="")
    # {"key": "value"} as given at create (workflows.labels); the rows of WorkflowInstanceLabel
    # are the index the list filters walk, this copy is what detail pages show.
    labels = models.JSONField(default=dict, blank=True)
    # Set for an instance created by step.run_workflow: the parent's completion-wake target.
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="children",
        db_index=False,  # workflow_inst_parent: partial, most instances have no parent
    )
    # The user the work is for (a lab report's round trip, a clinical gate): a wipe of that user
    # stops and deletes the instance and everything hanging from it (workflows.userdata).
    subject = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        db_index=False,  # workflow_inst_subject: partial, most instances are nobody's
    )
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "workflow_instance"
        constraints = [
            models.UniqueConstraint(
                fields=["workflow_name", "instance_id"], name="workflow_instance_unique_id"
            ),
            models.CheckConstraint(
                condition=Q(status__in=[s.value for s in Status]),
                name="workflow_instance_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(priority__gte=PRIORITY_MIN, priority__lte=PRIORITY_MAX),
                name="workflow_instance_priority_valid",
            ),
        ]
        indexes = [
            # selectors.instances_for_list: per workflow, optionally per status, newest first.
            models.Index(fields=["workflow_name", "status", "-id"], name="workflow_inst_status"),
            models.Index(fields=["workflow_name", "-id"], name="workflow_inst_name"),
            # workflows.gc: finished instances of a workflow and status past a cutoff; partial,
            # so running instances cost it nothing.
            models.Index(
                fields=["workflow_name", "status", "completed_at"],
                name="workflow_inst_finished",
                condition=Q(status__in=["complete", "errored", "terminated"]),
            ),
            # workflows.dashboard: errored instances (all, and in the last 24 h) for the console
            # and /metrics without scanning the finished instances.
            models.Index(
                fields=["updated_at"],
                name="workflow_inst_errored",
                condition=Q(status="errored"),
            ),
            # Children of a parent (composition). Partial: inserting a top-level instance, the
            # common case, writes no entry here.
            models.Index(
                fields=["parent"], name="workflow_inst_parent", condition=Q(parent__isnull=False)
            ),
            # workflows.userdata: a user's instances, for the wipe and the export. Partial, like
            # workflow_inst_parent.
            models.Index(
                fields=["subject"], name="workflow_inst_subject", condition=Q(subject__isnull=False)
            ),
        ]

    def __str__(self):
        return f"{self.workflow_name}/{self.instance_id}"


class WorkflowInstanceLabel(models.Model):
    """One label of an instance; selectors.instances_for_list filters through the
    (key, value, instance) index, one subquery per requested label (AND)."""

    # No index of its own: workflow_label_unique_key (instance, key) serves instance lookups.
    instance = models.ForeignKey(
        WorkflowInstance, on_delete=models.CASCADE, related_name="label_rows", db_index=False
    )
    key = models.CharField(max_length=32)
    value = models.CharField(max_length=64)

    class Meta:
        db_table = "workflow_instance_label"
        constraints = [
            models.UniqueConstraint(fields=["instance", "key"], name="workflow_label_unique_key"),
        ]
        indexes = [
            models.Index(fields=["key", "value", "instance"], name="workflow_label_lookup"),
        ]

    def __str__(self):
        return f"{self.key}:{self.value}"


class WorkflowStep(models.Model):
    """One step of one run: the replay cache (result/error) plus what the step is doing now."""

    # No index of its own: workflow_step_unique_name leads with instance_id.
    instance = models.ForeignKey(
        WorkflowInstance, on_delete=models.CASCADE, related_name="steps", db_index=False
    )
    run_number = models.PositiveIntegerField()
    name = models.CharField(max_length=256)
    type = models.CharField(max_length=16, choices=StepType.choices)
    status = models.CharField(max_length=16, choices=StepStatus.choices)
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.FloatField(null=True, blank=True)  # float: the limit may be infinite
    timeout_ms = models.BigIntegerField(null=True, blank=True)
    next_retry_at = models.DateTimeField(null=True, blank=True)
    wake_at = models.DateTimeField(null=True, blank=True)
    wait_event_type = models.CharField(max_length=100, blank=True, default="")
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)  # {"name", "message"}
    # The lease generation that completed the step; tests use it to prove one writer at a time.
    fencing_token = models.BigIntegerField(default=0)
    started_at = models.DateTimeField()
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "workflow_step"
        constraints = [
            models.UniqueConstraint(
                fields=["instance", "run_number", "name"], name="workflow_step_unique_name"
            ),
        ]

    def __str__(self):
        return f"{self.instance_id}#{self.run_number}:{self.name}"


class WorkflowEvent(models.Model):
    instance = models.ForeignKey(WorkflowInstance, on_delete=models.CASCADE, related_name="events")
    run_number = models.PositiveIntegerField()  # events of earlier runs are never delivered
    type = models.CharField(max_length=100)
    payload = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()
    consumed_at = models.DateTimeField(null=True, blank=True)
    consumed_by_step = models.CharField(max_length=256, blank=True, default="")

    class Meta:
        db_table = "workflow_event"
        indexes = [
            # runner.persist: the oldest undelivered event of a type in the current run.
            models.Index(
                fields=["instance", "run_number", "type", "id"],
                name="workflow_event_pending",
                condition=Q(consumed_at__isnull=True),
            ),
        ]

    def __str__(self):
        return f"{self.instance_id}:{self.type}"


class WorkflowTask(models.Model):
    """The durable queue: one row per instance run that still has work. run_at NULL means not
    runnable (paused); rows are deleted when the run completes, errors or is terminated."""

    instance = models.OneToOneField(WorkflowInstance, on_delete=models.CASCADE, related_name="task")
    run_number = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=TaskKind.choices)
    priority = models.PositiveSmallIntegerField()
    run_at = models.DateTimeField(null=True, blank=True)
    wait_event_type = models.CharField(max_length=100, blank=True, default="")
    lock_owner = models.CharField(max_length=64, blank=True, default="")
    locked_until = models.DateTimeField(null=True, blank=True)
    # Bumped by every claim and restart; a boundary write must present the current token.
    fencing_token = models.BigIntegerField(default=0)
    # Claims of this run so far (reset by restart): 1 means no step can exist yet.
    claims = models.PositiveIntegerField(default=0)
    # Claims of this run since it last made progress (a step finished, a suspension, the end).
    # Counted by the claim statement itself, so a runner that dies mid-step still counts; reset
    # by the boundary guard on progress and by restart. runner.execute errors the instance when
    # it passes WORKFLOWS_MAX_RECOVERY_ATTEMPTS (a poison instance that kills its runners).
    recovery_attempts = models.PositiveIntegerField(default=0)
    # A capped workflow's slot group ("<workflow>" or "<workflow>/<key value>") and its cap,
    # copied from the definition when the task is written; "" / NULL when uncapped. Leased
    # rows of a group are the instances running in it (workflows.concurrency).
    concurrency_group = models.CharField(max_length=200, blank=True, default="")
    concurrency_limit = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "workflow_task"
        indexes = [
            # runner.claim walks this index: runnable rows only, in claim order. id breaks
            # ties (oldest first): without it PostgreSQL orders equal keys by row position,
            # which an update moves.
            models.Index(
                fields=["priority", "run_at", "id"],
                name="workflow_task_runnable",
                condition=Q(run_at__isnull=False),
            ),
            # Counting running instances per capped group: leased capped rows only (few).
            models.Index(
                fields=["concurrency_group"],
                name="workflow_task_capped_leased",
                condition=Q(locked_until__isnull=False, concurrency_limit__isnull=False),
            ),
        ]

    def __str__(self):
        return f"task {self.instance_id}#{self.run_number} {self.kind}"


class LogLevel(models.TextChoices):
    DEBUG = "debug"
    INFO = "info"
    WARN = "warn"
    ERROR = "error"


class WorkflowLog(models.Model):
    # No index of its own: workflow_log_run leads with instance_id.
    instance = models.ForeignKey(
        WorkflowInstance, on_delete=models.CASCADE, related_name="logs", db_index=False
    )
    run_number = models.PositiveIntegerField()
    level = models.CharField(max_length=8, choices=LogLevel.choices)
    category = models.CharField(max_length=64, default="workflow")  # "system" = the engine
    message = models.CharField(max_length=2048)
    data = models.JSONField(null=True, blank=True)
    step_name = models.CharField(max_length=256, blank=True, default="")
    attempt = models.PositiveIntegerField(null=True, blank=True)
    is_replay = models.BooleanField(default=False)
    request_id = models.CharField(max_length=128, blank=True, default="")
    created_at = models.DateTimeField()

    class Meta:
        db_table = "workflow_log"
        indexes = [
            models.Index(fields=["instance", "run_number", "id"], name="workflow_log_run"),
            # workflows.gc.logs_prune: lines past WORKFLOWS_LOG_RETENTION, oldest first.
            models.Index(fields=["created_at"], name="workflow_log_created"),
        ]

    def __str__(self):
        return f"{self.level} {self.message[:40]}"


class WorkflowSchedule(models.Model):
    """One cron trigger of a workflow (workflows.triggers): when it fires next. The row is
    created the first time a runner sees the schedule in the code, so nothing fires for
    earlier times; `paused` stops it firing (operators pause a workflow's schedules)."""

    workflow_name = models.CharField(max_length=64)
    expression = models.CharField(max_length=100)
    timezone = models.CharField(max_length=64, default="UTC")
    next_fire_at = models.DateTimeField()
    paused = models.BooleanField(default=False)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "workflow_schedule"
        constraints = [
            models.UniqueConstraint(
                fields=["workflow_name", "expression"], name="workflow_schedule_unique"
            ),
        ]
        indexes = [
            # triggers.fire_due / next_fire_at: unpaused rows by fire time.
            models.Index(
                fields=["next_fire_at"],
                name="workflow_schedule_due",
                condition=Q(paused=False),
            ),
        ]

    def __str__(self):
        return f"{self.workflow_name} {self.expression}"
