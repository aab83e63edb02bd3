"""Input and output shapes of the ingest API (they also feed the OpenAPI schema)."""

from rest_framework import serializers

from ingest.models import RawEvent, TerraConnection, TraceEvent

# --- user API ---------------------------------------------------------------------------------


class ConnectRequest(serializers.Serializer):
    provider = serializers.CharField(required=False, allow_blank=True, max_length=64)


class ConnectResponse(serializers.Serializer):
    url = serializers.URLField()
    session_id = serializers.CharField(allow_null=True)
    reference_id = serializers.CharField()


class ConnectionOut(serializers.ModelSerializer):
    active = serializers.BooleanField(source="is_active")

    class Meta:
        model = TerraConnection
        fields = [
            "terra_user_id",
            "provider",
            "scopes",
            "active",
            "created_at",
            "deactivated_at",
            "last_webhook_at",
        ]


class ImportJobOut(serializers.Serializer):
    id = serializers.IntegerField()
    days = serializers.IntegerField()
    start_date = serializers.DateField()
    end_date = serializers.DateField()
    created_at = serializers.DateTimeField()
    requests = serializers.IntegerField(help_text="backfill requests sent (connection × type)")
    requests_failed = serializers.IntegerField()
    chunks_received = serializers.IntegerField(help_text="data deliveries since the job began")
    chunks_pending = serializers.IntegerField(allow_null=True)
    rows_normalized = serializers.IntegerField(help_text="typed rows written since the job began")


class ReconcileOut(serializers.Serializer):
    created = serializers.ListField(child=serializers.CharField())
    reactivated = serializers.ListField(child=serializers.CharField())
    deactivated = serializers.ListField(child=serializers.CharField())
    error = serializers.CharField(allow_null=True)
    skipped = serializers.BooleanField(help_text="reconciled lately: Terra was not asked")


class MeResponse(serializers.Serializer):
    username = serializers.CharField()
    email = serializers.CharField()
    connections = ConnectionOut(many=True)
    reconcile = ReconcileOut()
    imports = ImportJobOut(many=True)


class ImportRequest(serializers.Serializer):
    days = serializers.IntegerField(required=False, min_value=1, max_value=1460, default=365)


class BackfillRequestOut(serializers.Serializer):
    terra_user_id = serializers.CharField()
    provider = serializers.CharField()
    type = serializers.CharField()
    start_date = serializers.DateField()
    end_date = serializers.DateField()
    status = serializers.ChoiceField(choices=["requested", "failed"])
    error = serializers.CharField(required=False)


class ImportResponse(ImportJobOut):
    requested = BackfillRequestOut(many=True)


class SyncResponse(serializers.Serializer):
    since = serializers.DateTimeField(allow_null=True)
    server_time = serializers.DateTimeField(
        help_text="pass as `since` on the next pull (same on every page of one pull)"
    )
    count = serializers.IntegerField()
    next = serializers.CharField(allow_null=True, help_text="cursor of the next page, or null")
    tables = serializers.DictField(
        child=serializers.ListField(child=serializers.DictField()),
        help_text="table key → changed rows (ordered by updated_at, id)",
    )


# --- operator API -----------------------------------------------------------------------------


class RawEventRow(serializers.ModelSerializer):
    user = serializers.CharField(source="user.username", allow_null=True, default=None)

    class Meta:
        model = RawEvent
        fields = [
            "id",
            "event_type",
            "state",
            "terra_user_id",
            "reference_id",
            "provider",
            "user",
            "request_id",
            "received_at",
            "processed_at",
            "attempts",
            "next_attempt_at",
        ]


class DlqRow(RawEventRow):
    error = serializers.SerializerMethodField()
    age_seconds = serializers.SerializerMethodField()

    class Meta(RawEventRow.Meta):
        fields = RawEventRow.Meta.fields + ["error", "age_seconds"]

    def get_error(self, row) -> str | None:
        return row.process_error[:200] if row.process_error else None

    def get_age_seconds(self, row) -> int:
        return int((self.context["now"] - row.received_at).total_seconds())


class DlqResponse(serializers.Serializer):
    raw_events = DlqRow(many=True)
    cursor = serializers.CharField(allow_null=True)
    has_next_page = serializers.BooleanField()


class RawEventDetail(RawEventRow):
    process_error = serializers.CharField(allow_null=True)
    signature_verified = serializers.BooleanField()
    dedup_key = serializers.CharField()
    payload = serializers.JSONField()
    traces_url = serializers.SerializerMethodField()

    class Meta(RawEventRow.Meta):
        fields = RawEventRow.Meta.fields + [
            "process_error",
            "signature_verified",
            "dedup_key",
            "payload",
            "traces_url",
        ]

    def get_traces_url(self, row) -> str:
        return f"/v1/admin/traces?raw_event_id={row.pk}"


class DrainRequest(serializers.Serializer):
    include_skipped = serializers.BooleanField(required=False, default=False)
    include_no_connection = serializers.BooleanField(required=False, default=False)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=100, default=100)


class DrainResponse(serializers.Serializer):
    selected = serializers.IntegerField()
    enqueued = serializers.IntegerField()
    ids = serializers.ListField(child=serializers.IntegerField())
    outcomes = serializers.DictField(child=serializers.IntegerField())


class ReplayFilter(serializers.Serializer):
    state = serializers.ListField(child=serializers.CharField(), required=False)
    type = serializers.CharField(required=False)
    provider = serializers.CharField(required=False)
    error = serializers.CharField(required=False)
    terra_user_id = serializers.CharField(required=False)
    reference_id = serializers.CharField(required=False)
    request_id = serializers.CharField(required=False)
    user = serializers.CharField(required=False)
    older_than = serializers.CharField(required=False, help_text="e.g. 15m, 2h, 7d")
    newer_than = serializers.CharField(required=False)


class ReplayRequest(serializers.Serializer):
    ids = serializers.ListField(
        # Row ids are 64-bit: a larger number can name no row and would overflow the driver.
        child=serializers.IntegerField(min_value=1, max_value=2**63 - 1),
        required=False,
        max_length=1000,
    )
    filter = ReplayFilter(required=False, help_text="used when ids is absent; at most `limit`")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=1000, default=100)

    def validate(self, attrs):
        if not attrs.get("ids") and not attrs.get("filter"):
            raise serializers.ValidationError("Send ids or a filter.")
        return attrs


class ReplayResponse(serializers.Serializer):
    replayed = serializers.IntegerField()
    ids = serializers.ListField(child=serializers.IntegerField())


class UserOverviewResponse(serializers.Serializer):
    username = serializers.CharField()
    email = serializers.CharField()
    is_active = serializers.BooleanField()
    date_joined = serializers.DateTimeField()
    connections = ConnectionOut(many=True)
    counts = serializers.DictField(child=serializers.IntegerField())
    raw_events = serializers.IntegerField()
    last_event_received_at = serializers.DateTimeField(allow_null=True)
    parked = serializers.IntegerField()
    dlq = serializers.IntegerField()
    imports = ImportJobOut(many=True)


class WipeResponse(serializers.Serializer):
    username = serializers.CharField()
    deleted = serializers.DictField(child=serializers.IntegerField())


class TraceRow(serializers.ModelSerializer):
    user = serializers.CharField(source="user.username", allow_null=True, default=None)

    class Meta:
        model = TraceEvent
        fields = [
            "id",
            "created_at",
            "level",
            "event",
            "request_id",
            "raw_event_id",
            "user",
            "duration_ms",
            "data",
        ]


class TracePage(serializers.Serializer):
    traces = TraceRow(many=True)
    cursor = serializers.CharField(allow_null=True)
    has_next_page = serializers.BooleanField()
