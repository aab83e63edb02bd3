"""HTTP API under /v1/graphs (routes in graphs/urls.py). Each view parses with its serializer,
calls a service or selector and renders; refusals are GraphError/WorkflowError → {"code",
"message"}. Scopes: graphs:read (GET), graphs:write (definitions, bindings: pin, disable,
enable, approvers), graphs:run (start runs, canaries included); answers to human nodes are
authorized by graphs.answers (graphs:approve or graphs:approve:<binding>, the binding's
approver group). Run management (pause, terminate, …) uses the workflow routes of the run's
engine instance, with the workflow scopes."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from graphs import answers, selectors, services
from graphs.http import serializers as s
from ops.auth import credentials_required, scope_required
from ops.idempotency import idempotent
from ops.userdata import subject_user
from workflows.http import schema  # noqa: F401 - registers the auth schemes
from workflows.http.pagination import keyset_page

ERRORS = {code: s.GraphErrorSerializer for code in (400, 401, 403, 404, 409)}


def idempotency_header(required: bool) -> OpenApiParameter:
    return OpenApiParameter(
        "Idempotency-Key",
        OpenApiTypes.STR,
        OpenApiParameter.HEADER,
        required=required,
        description="1–255 visible ASCII characters; the first response is replayed for 24 h",
    )


class GraphsView(APIView):
    scopes = {"GET": "read"}  # method → graphs:<scope>; None: the service authorizes

    def get_permissions(self):
        scope = self.scopes.get(self.request.method, "read")
        if scope is None:
            return [credentials_required()()]
        return [scope_required(f"graphs:{scope}")()]


def page(queryset, query):
    return keyset_page(
        queryset,
        cursor=query.validated_data.get("cursor"),
        page_size=query.validated_data["page_size"],
        descending=True,
        param="cursor",
    )


class DefinitionListCreateView(GraphsView):
    scopes = {"GET": "read", "POST": "write"}

    @extend_schema(
        parameters=[s.DefinitionListQuerySerializer],
        responses={200: s.DefinitionListSerializer, **ERRORS},
        summary="List definition versions, newest first",
        operation_id="graphs_definitions_list",
    )
    def get(self, request):
        query = s.DefinitionListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        rows, cursor, more = page(
            selectors.definitions(
                name=query.validated_data.get("name"), tag=query.validated_data.get("tag")
            ),
            query,
        )
        body = {
            "definitions": [selectors.definition_body(d) for d in rows],
            "cursor": cursor,
            "has_next_page": more,
        }
        return Response(body)

    @extend_schema(
        request=s.DefinitionDocumentSerializer,
        responses={201: s.DefinitionSerializer, **ERRORS},
        summary="Create a draft (the next version of its name)",
        operation_id="graphs_definitions_create",
    )
    def post(self, request):
        definition = services.definition_create(document=request.data, request=request)
        return Response(selectors.definition_body(definition), status=201)


class DefinitionVersionView(GraphsView):
    scopes = {"GET": "read", "PUT": "write"}

    @extend_schema(
        responses={200: s.DefinitionSerializer, **ERRORS},
        summary="Get one version",
        operation_id="graphs_definition_get",
    )
    def get(self, request, name, version):
        definition = services.definition_get(name=name, version=version)
        return Response(selectors.definition_body(definition))

    @extend_schema(
        request=s.DefinitionDocumentSerializer,
        responses={200: s.DefinitionSerializer, **ERRORS},
        summary="Edit a draft (409 definition_published once published)",
        operation_id="graphs_definition_update",
    )
    def put(self, request, name, version):
        definition = services.definition_update(
            name=name, version=version, document=request.data, request=request
        )
        return Response(selectors.definition_body(definition))


class DefinitionPublishView(GraphsView):
    scopes = {"POST": "write"}

    @extend_schema(
        request=None,
        responses={200: s.DefinitionSerializer, **ERRORS},
        summary="Validate and publish a draft (400 invalid_graph names the offending ref)",
        operation_id="graphs_definition_publish",
    )
    def post(self, request, name, version):
        definition = services.definition_publish(name=name, version=version, request=request)
        return Response(selectors.definition_body(definition))


class BindingCreateView(GraphsView):
    scopes = {"POST": "write"}

    @extend_schema(
        request=s.BindingCreateSerializer,
        responses={201: s.BindingSerializer, **ERRORS},
        summary="Create a binding (what callers start)",
        operation_id="graphs_bindings_create",
    )
    def post(self, request):
        body = s.BindingCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        binding = services.binding_create(
            name=body.validated_data["name"],
            definition=body.validated_data["definition"],
            pinned_version=body.validated_data.get("pinned_version"),
            approvers=body.validated_data.get("approvers"),
            request=request,
        )
        return Response(s.BindingSerializer(binding).data, status=201)


class BindingPinView(GraphsView):
    scopes = {"POST": "write"}

    @extend_schema(
        request=s.BindingPinSerializer,
        responses={200: s.BindingSerializer, **ERRORS},
        summary="Pin a published version (null = follow the latest); audited",
        operation_id="graphs_binding_pin",
    )
    def post(self, request, name):
        body = s.BindingPinSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        binding = services.binding_pin(
            name=name, version=body.validated_data["version"], request=request
        )
        return Response(s.BindingSerializer(binding).data)


class BindingApproversView(GraphsView):
    scopes = {"POST": "write"}

    @extend_schema(
        request=s.BindingApproversSerializer,
        responses={200: s.BindingSerializer, **ERRORS},
        summary="Name the group whose staff members answer the binding's human nodes (null: "
        "only the global approvers); audited",
        operation_id="graphs_binding_approvers",
    )
    def post(self, request, name):
        body = s.BindingApproversSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        binding = services.binding_set_approvers(
            name=name, group=body.validated_data["group"], request=request
        )
        return Response(s.BindingSerializer(binding).data)


class BindingEnableView(GraphsView):
    """POST …/disable or …/enable: new runs refused (409 disabled) or allowed again."""

    scopes = {"POST": "write"}
    enabled = True

    @extend_schema(
        request=None,
        responses={200: s.BindingSerializer, **ERRORS},
        summary="Enable a binding again; audited",
        operation_id="graphs_binding_enable",
    )
    def post(self, request, name):
        binding = services.binding_set_enabled(name=name, enabled=self.enabled, request=request)
        return Response(s.BindingSerializer(binding).data)


class BindingDisableView(BindingEnableView):
    enabled = False

    @extend_schema(
        request=None,
        responses={200: s.BindingSerializer, **ERRORS},
        summary="Disable a binding: new runs 409 disabled, running ones go on; audited",
        operation_id="graphs_binding_disable",
    )
    def post(self, request, name):
        return super().post(request, name)


class RunCreateView(GraphsView):
    scopes = {"POST": "run"}

    @extend_schema(
        request=s.RunCreateSerializer,
        parameters=[idempotency_header(True)],
        responses={201: s.RunSummarySerializer, **ERRORS},
        summary="Start a run of the binding's version, or of `version` (a canary); input "
        "checked against input_schema",
        operation_id="graphs_runs_create",
    )
    @idempotent(required=True)
    def post(self, request, name):
        body = s.RunCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = services.run_create(
            binding_name=name,
            run_input=body.validated_data.get("input"),
            version=body.validated_data.get("version"),
            subject=subject_user(body.validated_data.get("subject")),
            request=request,
        )
        return Response(selectors.run_summary(run), status=201)


class RunListView(GraphsView):
    @extend_schema(
        parameters=[s.RunListQuerySerializer],
        responses={200: s.RunListSerializer, **ERRORS},
        summary="List runs, newest first",
        operation_id="graphs_runs_list",
    )
    def get(self, request):
        query = s.RunListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        rows, cursor, more = page(
            selectors.runs(
                binding=query.validated_data.get("binding"), tag=query.validated_data.get("tag")
            ),
            query,
        )
        return Response(
            {
                "runs": [selectors.run_summary(r) for r in rows],
                "cursor": cursor,
                "has_next_page": more,
            }
        )


class RunDetailView(GraphsView):
    @extend_schema(
        responses={200: s.RunDetailSerializer, **ERRORS},
        summary="A run: status, version, context and tokens",
        operation_id="graphs_run_get",
    )
    def get(self, request, run_id):
        run = services.run_get(run_id=run_id)
        return Response(selectors.run_detail(run))


class RunEventsView(GraphsView):
    scopes = {"GET": "read", "POST": None}  # answers: graphs.answers decides who may

    @extend_schema(
        parameters=[s.ListQuerySerializer],
        responses={200: s.RunEventListSerializer, **ERRORS},
        summary="The run's events in sequence order",
        operation_id="graphs_run_events",
    )
    def get(self, request, run_id):
        query = s.ListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        run = services.run_get(run_id=run_id)
        rows, cursor, more = keyset_page(
            selectors.current_events(run),
            cursor=query.validated_data.get("cursor"),
            page_size=query.validated_data["page_size"],
            descending=False,
            param="cursor",
        )
        body = {
            "events": s.RunEventSerializer(rows, many=True).data,
            "cursor": cursor,
            "has_next_page": more,
        }
        return Response(body)

    @extend_schema(
        request=s.RunEventCreateSerializer,
        parameters=[idempotency_header(False)],
        responses={200: s.RunAnsweredSerializer, **ERRORS},
        summary="Answer a waiting human node (graphs:approve or graphs:approve:<binding>, or "
        "the binding's approver group); 409 already_answered names the accepted answer",
        operation_id="graphs_run_event_send",
    )
    @idempotent(required=False)
    def post(self, request, run_id):
        body = s.RunEventCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        answer = answers.run_answer(
            run_id=run_id,
            type=body.validated_data["type"],
            payload=body.validated_data.get("payload"),
            token=body.validated_data.get("token"),
            request=request,
        )
        answer.run.instance.refresh_from_db()
        return Response(
            {**selectors.run_summary(answer.run), "answer": selectors.answer_body(answer)}
        )
