"""Request and response shapes of /v1/workflows, grouped by endpoint. Request serializers only
check shape (types, sizes); the engine's services own the rules (id patterns, states)."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

STATUSES = ["active", "waiting", "paused", "errored", "terminated", "complete"]
# Shown (never stored) for a live instance whose version is no longer registered in the code.
DISPLAY_STATUSES = [*STATUSES, "version_missing"]


class StrictCharField(serializers.CharField):
    """A JSON string only: DRF's CharField would turn 5 into "5", an id nobody sent."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


@extend_schema_field(
    {"type": "string", "pattern": "^[a-zA-Z0-9_][a-zA-Z0-9-_]*$", "minLength": 1, "maxLength": 100}
)
class EngineNameField(StrictCharField):
    """Instance ids and event types. The schema documents the engine's rule; the engine checks
    it, so a violation answers the contract's own code (invalid_instance_id, invalid_event_type)
    rather than a generic invalid_request."""


@extend_schema_field({"type": "integer", "minimum": 0, "maximum": 9, "default": 5})
class PriorityField(serializers.Field):
    """Passed through as sent: the engine answers invalid_priority for anything but 0-9."""

    def to_internal_value(self, data):
        return data

    def to_representation(self, value):
        return value


@extend_schema_field(
    {
        "type": "object",
        "maxProperties": 10,
        "propertyNames": {"pattern": "^[a-zA-Z0-9_][a-zA-Z0-9-_]*$", "maxLength": 32},
        "additionalProperties": {"type": "string", "maxLength": 64},
    }
)
class LabelsField(serializers.JSONField):
    """Passed through as sent: the engine (workflows.labels) answers invalid_labels."""


class ErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()


# --- shared pieces --------------------------------------------------------------------------


class InstanceErrorSerializer(serializers.Serializer):
    name = serializers.CharField()
    message = serializers.CharField()


class DetailsSerializer(serializers.Serializer):
    """Cloudflare's instance status: output only once complete, error only once errored."""

    status = serializers.ChoiceField(choices=DISPLAY_STATUSES)
    output = serializers.JSONField(required=False)
    error = InstanceErrorSerializer(required=False)


# --- GET /v1/workflows ----------------------------------------------------------------------


class ScheduleSerializer(serializers.Serializer):
    cron = serializers.CharField()
    timezone = serializers.CharField()
    next_fire_at = serializers.DateTimeField()
    paused = serializers.BooleanField()
    last_fired_at = serializers.DateTimeField(allow_null=True)


class WorkflowSummarySerializer(serializers.Serializer):
    name = serializers.CharField()
    versions = serializers.ListField(child=serializers.IntegerField())
    active_version = serializers.IntegerField(allow_null=True)
    schedules = ScheduleSerializer(many=True)


class WorkflowListSerializer(serializers.Serializer):
    workflows = WorkflowSummarySerializer(many=True)


# --- instances list / create / batch --------------------------------------------------------


class InstanceListQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=DISPLAY_STATUSES, required=False)
    page_size = serializers.IntegerField(min_value=1, max_value=200, default=50)
    cursor = serializers.CharField(required=False, max_length=200)
    label = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        max_length=10,
        help_text="key:value, repeatable; an instance must carry every label given",
    )


class InstanceSummarySerializer(serializers.Serializer):
    id = serializers.CharField()
    details = DetailsSerializer()


class InstanceListSerializer(serializers.Serializer):
    instances = InstanceSummarySerializer(many=True)
    cursor = serializers.CharField(allow_null=True)
    has_next_page = serializers.BooleanField()


class InstanceCreateSerializer(serializers.Serializer):
    id = EngineNameField(required=False, allow_blank=True, max_length=1000)
    params = serializers.JSONField(required=False, allow_null=True)
    priority = PriorityField(required=False, allow_null=True)
    labels = LabelsField(required=False, allow_null=True)
    version = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="run this registered version instead of the active one (a canary)",
    )
    subject = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=150,
        help_text="username of the user the work is for: wiping them deletes the instance "
        "(400 unknown_subject for nobody)",
    )


class BatchItemSerializer(serializers.Serializer):
    id = EngineNameField(allow_blank=True, max_length=1000)
    params = serializers.JSONField(required=False, allow_null=True)
    priority = PriorityField(required=False, allow_null=True)
    labels = LabelsField(required=False, allow_null=True)


class InstanceBatchSerializer(serializers.Serializer):
    instances = BatchItemSerializer(many=True, allow_empty=False, max_length=100)


class InstanceBatchResultSerializer(serializers.Serializer):
    instances = InstanceSummarySerializer(many=True)


# --- GET one instance -----------------------------------------------------------------------


class CurrentStepSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField()
    status = serializers.CharField()
    attempts = serializers.IntegerField()
    max_attempts = serializers.IntegerField(allow_null=True, help_text="null: unlimited")
    timeout_ms = serializers.IntegerField(allow_null=True)
    next_retry_at = serializers.DateTimeField(allow_null=True)
    wake_at = serializers.DateTimeField(allow_null=True)
    wait_event_type = serializers.CharField(allow_null=True)
    error = InstanceErrorSerializer(required=False, allow_null=True)


class InstanceMetaSerializer(serializers.Serializer):
    workflow_name = serializers.CharField()
    version = serializers.IntegerField()
    run_number = serializers.IntegerField()
    params = serializers.JSONField(allow_null=True)
    labels = serializers.DictField(child=serializers.CharField())
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)
    current_step = CurrentStepSerializer(required=False)


class ParentSerializer(serializers.Serializer):
    workflow = serializers.CharField()
    id = serializers.CharField()


class ChildSerializer(serializers.Serializer):
    workflow = serializers.CharField()
    id = serializers.CharField()
    status = serializers.ChoiceField(choices=STATUSES)


class InstanceDetailSerializer(serializers.Serializer):
    id = serializers.CharField()
    details = DetailsSerializer()
    meta = InstanceMetaSerializer()
    parent = ParentSerializer(allow_null=True, help_text="set when step.run_workflow created it")
    children = ChildSerializer(many=True, help_text="instances its step.run_workflow created")


# --- actions and events ---------------------------------------------------------------------


class RestartSerializer(serializers.Serializer):
    from_step = StrictCharField(
        required=False,
        max_length=256,
        help_text="keep the results of the steps completed before this one (400 unknown_step)",
    )


class ActionResultSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    details = DetailsSerializer()


class EventCreateSerializer(serializers.Serializer):
    type = EngineNameField(max_length=1000)
    payload = serializers.JSONField(required=False, allow_null=True)


class EventResultSerializer(serializers.Serializer):
    details = DetailsSerializer()


# --- history --------------------------------------------------------------------------------


class HistoryQuerySerializer(serializers.Serializer):
    run_number = serializers.IntegerField(min_value=1, required=False)
    page_size = serializers.IntegerField(min_value=1, max_value=200, default=50)
    steps_cursor = serializers.CharField(required=False, max_length=200)
    events_cursor = serializers.CharField(required=False, max_length=200)
    logs_cursor = serializers.CharField(required=False, max_length=200)
    order = serializers.ChoiceField(choices=["asc", "desc"], default="asc")
    include_logs = serializers.BooleanField(default=False)
    log_level = serializers.ChoiceField(choices=["debug", "info", "warn", "error"], required=False)
    log_category = serializers.CharField(required=False, max_length=64)


class StepRowSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField()
    status = serializers.CharField()
    attempts = serializers.IntegerField()
    result = serializers.JSONField(allow_null=True)
    error = InstanceErrorSerializer(allow_null=True)
    next_retry_at = serializers.DateTimeField(allow_null=True)
    wake_at = serializers.DateTimeField(allow_null=True)
    wait_event_type = serializers.CharField(allow_blank=True)
    started_at = serializers.DateTimeField()
    completed_at = serializers.DateTimeField(allow_null=True)


class EventRowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    type = serializers.CharField()
    payload = serializers.JSONField(allow_null=True)
    created_at = serializers.DateTimeField()
    consumed_at = serializers.DateTimeField(allow_null=True)
    consumed_by_step = serializers.CharField(allow_blank=True)


class LogRowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    level = serializers.CharField()
    category = serializers.CharField()
    message = serializers.CharField()
    data = serializers.JSONField(allow_null=True)
    step = serializers.CharField(source="step_name", allow_blank=True)
    attempt = serializers.IntegerField(allow_null=True)
    is_replay = serializers.BooleanField()
    request_id = serializers.CharField(allow_blank=True)


class HistorySerializer(serializers.Serializer):
    run_number = serializers.IntegerField()
    steps = StepRowSerializer(many=True)
    steps_cursor = serializers.CharField(allow_null=True)
    steps_has_next_page = serializers.BooleanField()
    events = EventRowSerializer(many=True)
    events_cursor = serializers.CharField(allow_null=True)
    events_has_next_page = serializers.BooleanField()
    logs = LogRowSerializer(many=True, required=False)
    logs_cursor = serializers.CharField(allow_null=True, required=False)
    logs_has_next_page = serializers.BooleanField(required=False)


# --- runner and versions --------------------------------------------------------------------


class TickSerializer(serializers.Serializer):
    max_instances = serializers.IntegerField(min_value=1, max_value=1000, default=10)
    max_steps = serializers.IntegerField(min_value=1, max_value=10000, required=False)


class TickResultSerializer(serializers.Serializer):
    processed = serializers.IntegerField()


class ActiveVersionSerializer(serializers.Serializer):
    workflow_name = serializers.CharField()
    active_version = serializers.IntegerField()
    versions = serializers.ListField(child=serializers.IntegerField())
    updated_at = serializers.DateTimeField(allow_null=True)
    disabled = serializers.BooleanField(help_text="new instances are refused with 409 disabled")


# --- GET /v1/workflows/{name} ---------------------------------------------------------------


class LoadSerializer(serializers.Serializer):
    running = serializers.IntegerField()
    queued = serializers.IntegerField()


class ConcurrencySerializer(serializers.Serializer):
    limit = serializers.IntegerField()
    key = serializers.CharField(allow_null=True)
    running = serializers.IntegerField()
    queued = serializers.IntegerField()
    by_key = serializers.DictField(child=LoadSerializer())


class WorkflowDetailSerializer(serializers.Serializer):
    name = serializers.CharField()
    versions = serializers.ListField(child=serializers.IntegerField())
    active_version = serializers.IntegerField(allow_null=True)
    schedules = ScheduleSerializer(many=True)
    concurrency = ConcurrencySerializer(allow_null=True)
    running = serializers.IntegerField()
    queued = serializers.IntegerField()
    retention = serializers.DictField(child=serializers.CharField(), allow_null=True)
