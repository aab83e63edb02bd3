"""Storage for graph workflows: definitions (name, version) with their JSON document, bindings
that callers start (and who may answer their human nodes), runs (one per engine instance),
tokens, per-run sequenced events, and the one accepted answer of each waiting human node.

Timestamps come from workflows.runtime (never auto_now) so the test harness controls time.
"""

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q

from workflows.models import WorkflowInstance


class DefinitionStatus(models.TextChoices):
    DRAFT = "draft"
    PUBLISHED = "published"


class GraphDefinition(models.Model):
    """One version of a graph. A draft may be edited; once published the document, schemas and
    checksum never change (graphs.services refuses edits with 409 definition_published)."""

    name = models.CharField(max_length=64)
    version = models.PositiveIntegerField()
    status = models.CharField(
        max_length=16, choices=DefinitionStatus.choices, default=DefinitionStatus.DRAFT
    )
    description = models.TextField(blank=True, default="")
    document = models.JSONField()  # the definition in the JSON vocabulary, as submitted
    input_schema = models.JSONField(null=True, blank=True)
    context_schema = models.JSONField(null=True, blank=True)
    initial_node = models.CharField(max_length=64, blank=True, default="")
    timeout = models.CharField(max_length=64, blank=True, default="")
    on_timeout = models.CharField(max_length=16, default="fail")
    checksum = models.CharField(max_length=64)  # sha256 of the canonical JSON document
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "graph_definition"
        constraints = [
            models.UniqueConstraint(fields=["name", "version"], name="graph_definition_identity"),
            models.CheckConstraint(
                condition=Q(status__in=[s.value for s in DefinitionStatus]),
                name="graph_definition_status_valid",
            ),
            # A published version always says when (services.definition_publish sets both).
            models.CheckConstraint(
                condition=Q(status="draft") | Q(published_at__isnull=False),
                name="graph_definition_published_at",
            ),
        ]
        indexes = [
            # selectors.latest_published: newest published version of a name.
            models.Index(fields=["name", "status", "-version"], name="graph_def_latest"),
        ]

    def __str__(self):
        return f"{self.name} v{self.version} ({self.status})"


class GraphDefinitionTag(models.Model):
    """One tag of a definition version (the document's `tags`), a row each so that lists can
    filter by tag on every database."""

    definition = models.ForeignKey(
        GraphDefinition, on_delete=models.CASCADE, related_name="tag_rows", db_index=False
    )
    name = models.CharField(max_length=64)

    class Meta:
        db_table = "graph_definition_tag"
        constraints = [
            # Also the index behind definition.tag_rows (services._fields rewrites them).
            models.UniqueConstraint(
                fields=["definition", "name"], name="graph_definition_tag_once"
            ),
        ]
        indexes = [
            # selectors.definitions(tag=) and runs(tag=): the versions carrying a tag.
            models.Index(fields=["name", "definition"], name="graph_def_tag_name"),
        ]

    def __str__(self):
        return self.name


class GraphBinding(models.Model):
    """What callers start: a name pointing at a definition name, pinned to a version or
    following the latest published one (pinned_version null). A disabled binding refuses new
    runs (409 disabled); its running ones go on. Its human nodes are answered by the members of
    `approvers` (staff), holders of the answer_any_human_node permission, and API keys with
    graphs:approve or graphs:approve:<name> (graphs.answers)."""

    name = models.CharField(max_length=64, unique=True)
    definition_name = models.CharField(max_length=64)
    pinned_version = models.PositiveIntegerField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    # A deleted group answers nothing any more: only the global approvers are left.
    approvers = models.ForeignKey(
        Group, on_delete=models.SET_NULL, null=True, blank=True, related_name="graph_bindings"
    )
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "graph_binding"
        permissions = [
            ("answer_any_human_node", "Can answer the human nodes of every binding"),
        ]

    def __str__(self):
        pin = "latest" if self.pinned_version is None else f"v{self.pinned_version}"
        off = "" if self.enabled else " (disabled)"
        return f"{self.name} → {self.definition_name} {pin}{off}"


class GraphRun(models.Model):
    """A run is an engine instance of the `graph-run` workflow; this row says which definition
    version it runs and holds the run context's current value (the executor updates it in the
    transaction of each step that changes it)."""

    run_id = models.CharField(max_length=100, unique=True)  # = the engine instance id
    instance = models.OneToOneField(
        WorkflowInstance, on_delete=models.CASCADE, related_name="graph_run"
    )
    definition = models.ForeignKey(GraphDefinition, on_delete=models.PROTECT, related_name="runs")
    binding = models.ForeignKey(
        GraphBinding, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs"
    )
    binding_name = models.CharField(max_length=64, blank=True, default="")
    context = models.JSONField(default=dict)
    # Who started it, as audit rows name actors ("api_key:<id>:<name>", "user:<name>", "system";
    # "" for runs older than the column): a four-eyes definition refuses their answers.
    started_by = models.CharField(max_length=200, blank=True, default="")
    # The user the run is about (its instance's subject; a child run inherits its parent's):
    # a wipe of that user stops and deletes it (graphs.userdata).
    subject = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        db_index=False,  # graph_run_subject: partial
    )
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "graph_run"
        indexes = [
            # selectors.runs_for_list: newest first, optionally per binding.
            models.Index(fields=["binding_name", "-id"], name="graph_run_binding"),
            # graphs.userdata: a user's runs, for the wipe and the export.
            models.Index(
                fields=["subject"], name="graph_run_subject", condition=Q(subject__isnull=False)
            ),
        ]

    def __str__(self):
        return f"graph run {self.run_id}"


class TokenStatus(models.TextChoices):
    PENDING = "pending"
    EXECUTING = "executing"
    WAITING_FOR_SIBLINGS = "waiting_for_siblings"
    COMPLETED = "completed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


class GraphToken(models.Model):
    """One visit of a node by a run: where it is, how it got there (parent token, fan-out
    transition and branch), and how it ended."""

    # No index of its own: graph_token_unique_path (run, engine_run, path_id) serves it.
    run = models.ForeignKey(
        GraphRun, on_delete=models.CASCADE, related_name="tokens", db_index=False
    )
    # The engine run (instance run_number) that made the row: a restart replays the graph from
    # the start, and its tokens and events sit beside the earlier run's instead of clashing.
    engine_run = models.PositiveIntegerField(default=1)
    path_id = models.CharField(max_length=255)
    node_ref = models.CharField(max_length=64)
    status = models.CharField(max_length=24, choices=TokenStatus.choices)
    parent_path = models.CharField(max_length=255, blank=True, default="")
    fan_out = models.CharField(max_length=140, blank=True, default="")
    branch_index = models.PositiveIntegerField(null=True, blank=True)
    branch_total = models.PositiveIntegerField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    sequence = models.PositiveIntegerField()  # creation order within the run
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "graph_token"
        constraints = [
            models.UniqueConstraint(
                fields=["run", "engine_run", "path_id"], name="graph_token_unique_path"
            ),
            models.CheckConstraint(
                condition=Q(status__in=[s.value for s in TokenStatus]),
                name="graph_token_status_valid",
            ),
        ]

    def __str__(self):
        return f"{self.run_id}:{self.path_id} {self.node_ref}"


class RunEventType(models.TextChoices):
    RUN_STARTED = "run_started"
    TOKEN_SPAWNED = "token_spawned"
    NODE_STARTED = "node_started"
    NODE_COMPLETED = "node_completed"
    NODE_FAILED = "node_failed"
    FAN_IN_WAITING = "fan_in_waiting"
    FAN_IN_COMPLETED = "fan_in_completed"
    CONTEXT_UPDATED = "context_updated"  # data.changes: the context's history of updates
    RUN_COMPLETED = "run_completed"
    RUN_FAILED = "run_failed"
    RUN_TIMED_OUT = "run_timed_out"  # on_timeout human_gate: the run waits at its gate


class GraphRunEvent(models.Model):
    """Every state change of a run, numbered per run. The executor assigns the numbers
    deterministically, so a replay regenerates the same ones; the unique constraint turns any
    disagreement into a loud error instead of a silently reordered history."""

    # No index of its own: graph_run_event_sequence (run, engine_run, sequence_number) serves it.
    run = models.ForeignKey(
        GraphRun, on_delete=models.CASCADE, related_name="run_events", db_index=False
    )
    engine_run = models.PositiveIntegerField(default=1)  # see GraphToken.engine_run
    sequence_number = models.PositiveIntegerField()
    type = models.CharField(max_length=32, choices=RunEventType.choices)
    token_path = models.CharField(max_length=255, blank=True, default="")
    node_ref = models.CharField(max_length=64, blank=True, default="")
    data = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "graph_run_event"
        constraints = [
            models.UniqueConstraint(
                fields=["run", "engine_run", "sequence_number"], name="graph_run_event_sequence"
            ),
            models.CheckConstraint(
                condition=Q(type__in=[s.value for s in RunEventType]),
                name="graph_run_event_type_valid",
            ),
        ]

    def __str__(self):
        return f"{self.run_id}#{self.sequence_number} {self.type}"


class AnswerDecision(models.TextChoices):
    APPROVE = "approve"  # payload {"approved": true}
    REJECT = "reject"  # payload {"approved": false}
    ANSWER = "answer"  # any other payload


class GraphAnswer(models.Model):
    """The accepted answer to one waiting human node (one token of one engine run): who gave
    it, when, and what it decided. Written in the transaction that stores the answer's engine
    event and its audit row (graphs.answers.run_answer)."""

    # No index of its own: graph_answer_once (run, engine_run, token_path) serves it.
    run = models.ForeignKey(
        GraphRun, on_delete=models.CASCADE, related_name="answers", db_index=False
    )
    engine_run = models.PositiveIntegerField()  # see GraphToken.engine_run
    token_path = models.CharField(max_length=255)
    node_ref = models.CharField(max_length=64)
    event_type = models.CharField(max_length=100)
    decision = models.CharField(max_length=16, choices=AnswerDecision.choices)
    actor = models.CharField(max_length=200)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "graph_answer"
        constraints = [
            # One answer per waiting node, under any concurrency: graphs.answers inserts the
            # row first and answers 409 already_answered when this refuses it.
            models.UniqueConstraint(
                fields=["run", "engine_run", "token_path"], name="graph_answer_once"
            ),
            models.CheckConstraint(
                condition=Q(decision__in=[d.value for d in AnswerDecision]),
                name="graph_answer_decision_valid",
            ),
        ]

    def __str__(self):
        return f"{self.run_id}:{self.token_path} {self.decision} by {self.actor}"
