"""Request and response shapes of /v1/graphs. Requests are checked for shape only; the rules
(vocabulary, versions, schemas) belong to graphs.services and graphs.spec."""

from rest_framework import serializers


class GraphErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    ref = serializers.CharField(required=False, allow_null=True)
    field = serializers.CharField(required=False)
    schema_ref = serializers.CharField(
        required=False, help_text="the offending $ref of a JSON Schema (invalid_graph)"
    )
    answer = serializers.JSONField(
        required=False, help_text="already_answered: the accepted answer (see RunAnswer)"
    )


class DefinitionDocumentSerializer(serializers.Serializer):
    """The JSON vocabulary (docs/graphs/README.md); only the top-level shape is declared here."""

    name = serializers.CharField(max_length=64)
    description = serializers.CharField(required=False, allow_blank=True)
    initial_node = serializers.CharField()
    input_schema = serializers.JSONField(required=False)
    context_schema = serializers.JSONField(required=False)
    output_schema = serializers.JSONField(
        required=False, help_text="the final context is checked against it (OutputInvalid)"
    )
    tags = serializers.ListField(child=serializers.CharField(max_length=64), required=False)
    timeout = serializers.CharField(required=False)
    on_timeout = serializers.ChoiceField(
        choices=["fail", "cancel_all", "human_gate"], required=False
    )
    timeout_gate = serializers.CharField(
        required=False, help_text="human_gate: the human node a timed-out run waits at"
    )
    nodes = serializers.ListField(child=serializers.JSONField())
    transitions = serializers.ListField(child=serializers.JSONField())


class DefinitionSerializer(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["draft", "published"])
    description = serializers.CharField()
    checksum = serializers.CharField()
    created_at = serializers.DateTimeField()
    published_at = serializers.DateTimeField(allow_null=True)
    tags = serializers.ListField(child=serializers.CharField())
    document = serializers.JSONField()


class DefinitionListSerializer(serializers.Serializer):
    definitions = DefinitionSerializer(many=True)
    cursor = serializers.CharField(allow_null=True)
    has_next_page = serializers.BooleanField()


class ListQuerySerializer(serializers.Serializer):
    page_size = serializers.IntegerField(min_value=1, max_value=200, default=50)
    cursor = serializers.CharField(required=False, max_length=200)


class DefinitionListQuerySerializer(ListQuerySerializer):
    name = serializers.CharField(required=False, max_length=64)
    tag = serializers.CharField(required=False, max_length=64, help_text="versions with this tag")


class BindingCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64)
    definition = serializers.CharField(max_length=64)
    pinned_version = serializers.IntegerField(min_value=1, allow_null=True, required=False)
    approvers = serializers.CharField(
        max_length=150,
        required=False,
        allow_null=True,
        help_text="a group whose staff members answer this binding's human nodes",
    )


class BindingApproversSerializer(serializers.Serializer):
    group = serializers.CharField(
        max_length=150, allow_null=True, help_text="a group's name; null: global approvers only"
    )


class BindingPinSerializer(serializers.Serializer):
    version = serializers.IntegerField(min_value=1, allow_null=True)


class BindingSerializer(serializers.Serializer):
    name = serializers.CharField()
    definition = serializers.CharField(source="definition_name")
    pinned_version = serializers.IntegerField(allow_null=True)
    enabled = serializers.BooleanField(help_text="false: new runs are refused (409 disabled)")
    approvers = serializers.CharField(
        source="approvers.name",
        allow_null=True,
        default=None,
        help_text="the group whose staff members answer its human nodes",
    )
    updated_at = serializers.DateTimeField()


class RunCreateSerializer(serializers.Serializer):
    input = serializers.JSONField(required=False, allow_null=True)
    version = serializers.IntegerField(
        min_value=1,
        required=False,
        allow_null=True,
        help_text="a canary: run this published version of the binding's definition instead "
        "of the one the binding points at (the pointer stays)",
    )
    subject = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=150,
        help_text="username of the user the run is about: wiping them deletes the run "
        "(400 unknown_subject for nobody)",
    )


class RunSummarySerializer(serializers.Serializer):
    id = serializers.CharField()
    binding = serializers.CharField()
    definition = serializers.CharField()
    version = serializers.IntegerField()
    status = serializers.CharField()
    created_at = serializers.DateTimeField()


class RunAnswerSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="the human node's token")
    node = serializers.CharField()
    type = serializers.CharField()
    decision = serializers.ChoiceField(
        choices=["approve", "reject", "answer"],
        help_text='payload {"approved": true} approves, false rejects; anything else answers',
    )
    by = serializers.CharField(help_text="the actor, as audit rows name it")
    at = serializers.DateTimeField()


class RunAnsweredSerializer(RunSummarySerializer):
    answer = RunAnswerSerializer()


class RunListQuerySerializer(ListQuerySerializer):
    binding = serializers.CharField(required=False, max_length=64)
    tag = serializers.CharField(
        required=False, max_length=64, help_text="runs of definition versions with this tag"
    )


class RunListSerializer(serializers.Serializer):
    runs = RunSummarySerializer(many=True)
    cursor = serializers.CharField(allow_null=True)
    has_next_page = serializers.BooleanField()


class TokenSerializer(serializers.Serializer):
    path_id = serializers.CharField()
    node = serializers.CharField(source="node_ref")
    status = serializers.CharField()
    parent = serializers.CharField(source="parent_path", allow_blank=True)
    fan_out = serializers.CharField(allow_blank=True)
    branch_index = serializers.IntegerField(allow_null=True)
    branch_total = serializers.IntegerField(allow_null=True)
    output = serializers.JSONField(allow_null=True)
    error = serializers.JSONField(allow_null=True)


class RunDetailSerializer(RunSummarySerializer):
    engine_run = serializers.IntegerField(help_text="the engine run the tokens belong to")
    output = serializers.JSONField(required=False)
    error = serializers.JSONField(required=False)
    context = serializers.JSONField()
    tokens = TokenSerializer(many=True)


class RunEventSerializer(serializers.Serializer):
    sequence_number = serializers.IntegerField()
    type = serializers.CharField()
    token = serializers.CharField(source="token_path", allow_blank=True)
    node = serializers.CharField(source="node_ref", allow_blank=True)
    data = serializers.JSONField(allow_null=True)
    created_at = serializers.DateTimeField()


class RunEventListSerializer(serializers.Serializer):
    events = RunEventSerializer(many=True)
    cursor = serializers.CharField(allow_null=True)
    has_next_page = serializers.BooleanField()


class RunEventCreateSerializer(serializers.Serializer):
    type = serializers.CharField(max_length=100)
    payload = serializers.JSONField(required=False, allow_null=True)
    token = serializers.CharField(
        max_length=200,
        required=False,
        allow_null=True,
        help_text="answer only this token's waiting human node (runs on graph-run v3+); "
        "without it the first branch waiting for `type` takes the event",
    )
