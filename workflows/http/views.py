"""HTTP API under /v1/workflows (routes in workflows/urls.py; rules in docs/workflows/http.md).

Each view parses with the serializer next to it, calls a selector or an action
(workflows.actions: engine service + audit row) and renders. Scopes and policies come from
permissions.py; Idempotency-Key from ops.idempotency; every refusal carries its own HTTP status
(workflows.errors).
"""

import functools

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework.response import Response
from rest_framework.views import APIView

from ops.idempotency import idempotent
from ops.userdata import subject_user
from workflows import actions, labels, selectors, services
from workflows.authoring import registry
from workflows.errors import WorkflowNotFound
from workflows.http import schema  # noqa: F401 - registers the auth schemes
from workflows.http import serializers as s
from workflows.http.pagination import keyset_page
from workflows.http.permissions import workflows_permission
from workflows.models import DEFAULT_PRIORITY, WorkflowDeployment, WorkflowInstance

ROW_SERIALIZERS = {
    "steps": s.StepRowSerializer,
    "events": s.EventRowSerializer,
    "logs": s.LogRowSerializer,
}
ERRORS = {code: s.ErrorSerializer for code in (400, 401, 403, 404, 409)}


def idempotency_header(required: bool) -> OpenApiParameter:
    return OpenApiParameter(
        "Idempotency-Key",
        OpenApiTypes.STR,
        OpenApiParameter.HEADER,
        required=required,
        description="1–255 visible ASCII characters; the first response is replayed for 24 h"
        + ("" if required else " (optional: without it nothing is deduplicated)"),
    )


def mutation(action: str, *, key_required: bool = False):
    """Idempotency-Key handling plus the audit row of a replayed answer (a fresh answer is
    audited by the operation it ran)."""

    def decorate(method):
        handler = idempotent(required=key_required)(method)

        @functools.wraps(method)
        def wrapper(view, request, *args, **kwargs):
            response = handler(view, request, *args, **kwargs)
            if getattr(request, "idempotency_replayed", False):
                actions.audit(
                    action=action.format(action=getattr(view, "action", "")),
                    resource=actions.instance_resource(
                        kwargs.get("name", ""), kwargs.get("instance_id")
                    ),
                    request=request,
                    deduplicated=True,
                )
            return response

        return wrapper

    return decorate


class WorkflowsView(APIView):
    """Base: one scope per HTTP method."""

    scopes = {"GET": "read"}

    def get_permissions(self):
        return [workflows_permission(self.scopes.get(self.request.method, "read"))()]

    def instance(self):
        return selectors.instance_get(
            workflow_name=self.kwargs["name"], instance_id=self.kwargs["instance_id"]
        )


def summary(instance) -> dict:
    return {"id": instance.instance_id, "details": selectors.instance_details(instance)}


def active_version_body(name: str) -> dict:
    active = services.workflow_active_version(name=name)
    row = WorkflowDeployment.objects.filter(workflow_name=name).first()
    return {
        "workflow_name": name,
        "active_version": active,
        "versions": registry.versions(name),
        "updated_at": row.updated_at if row else None,
        "disabled": bool(row and row.disabled),
    }


class WorkflowListView(WorkflowsView):
    @extend_schema(
        responses={200: s.WorkflowListSerializer, **ERRORS},
        summary="List workflows",
        operation_id="workflows_list",
    )
    def get(self, request):
        return Response({"workflows": selectors.workflow_summaries()})


def require_known_workflow(name: str) -> None:
    """404 for a name neither the code nor the database knows; a workflow removed from the code
    still lists its instances (they show as version_missing)."""
    if (
        not registry.versions(name)
        and not WorkflowInstance.objects.filter(workflow_name=name).exists()
    ):
        raise WorkflowNotFound(f"no workflow named {name!r}")


class InstanceListCreateView(WorkflowsView):
    scopes = {"GET": "read", "POST": "create"}

    @extend_schema(
        parameters=[s.InstanceListQuerySerializer],
        responses={200: s.InstanceListSerializer, **ERRORS},
        summary="List instances, newest first",
        operation_id="workflows_instances_list",
    )
    def get(self, request, name):
        query = s.InstanceListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        label_filters = labels.parse_filters(query.validated_data.get("label", []))
        require_known_workflow(name)
        rows, cursor, more = keyset_page(
            selectors.instances_for_list(
                workflow_name=name,
                status=query.validated_data.get("status"),
                labels=label_filters,
            ),
            cursor=query.validated_data.get("cursor"),
            page_size=query.validated_data["page_size"],
            descending=True,
            param="cursor",
        )
        body = {"instances": [summary(i) for i in rows], "cursor": cursor, "has_next_page": more}
        return Response(body)

    @extend_schema(
        request=s.InstanceCreateSerializer,
        parameters=[idempotency_header(True)],
        responses={201: s.InstanceSummarySerializer, **ERRORS},
        summary="Create an instance",
        operation_id="workflows_instances_create",
    )
    @mutation("workflow_instance.create", key_required=True)
    def post(self, request, name):
        body = s.InstanceCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        instance = actions.do_create(
            workflow_name=name,
            instance_id=body.validated_data.get("id"),
            params=body.validated_data.get("params"),
            priority=body.validated_data.get("priority", DEFAULT_PRIORITY),
            labels=body.validated_data.get("labels"),
            version=body.validated_data.get("version"),
            subject=subject_user(body.validated_data.get("subject")),
            request=request,
        )
        return Response(summary(instance), status=201)


class InstanceBatchView(WorkflowsView):
    scopes = {"POST": "create"}

    @extend_schema(
        request=s.InstanceBatchSerializer,
        parameters=[idempotency_header(True)],
        responses={201: s.InstanceBatchResultSerializer, **ERRORS},
        summary="Create up to 100 instances; existing ids are skipped",
        operation_id="workflows_instances_batch",
    )
    @mutation("workflow_instance.create_batch", key_required=True)
    def post(self, request, name):
        body = s.InstanceBatchSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        created = actions.do_create_batch(
            workflow_name=name, items=body.validated_data["instances"], request=request
        )
        result = {"instances": [summary(i) for i in created]}
        return Response(result, status=201)


class InstanceDetailView(WorkflowsView):
    @extend_schema(
        responses={200: s.InstanceDetailSerializer, **ERRORS},
        summary="Get an instance",
        operation_id="workflows_instance_get",
    )
    def get(self, request, name, instance_id):
        instance = self.instance()
        body = {
            **summary(instance),
            "meta": selectors.instance_meta(instance),
            **selectors.instance_family(instance),
        }
        return Response(body)


class InstanceActionView(WorkflowsView):
    """pause | resume | terminate | restart | retry-now | skip-wait: one subclass per action
    (ACTION_VIEWS below), so each has its own summary and operation id in the schema."""

    scopes = {"POST": "manage"}
    action = "pause"

    @extend_schema(
        request=None,
        parameters=[idempotency_header(False)],
        responses={200: s.ActionResultSerializer, **ERRORS},
    )
    @mutation("workflow_instance.{action}")
    def post(self, request, name, instance_id):
        instance = actions.do_instance_action(
            instance=self.instance(), action=self.action, request=request
        )
        body = {"ok": True, "details": selectors.instance_details(instance)}
        return Response(body)


class InstanceRestartActionView(InstanceActionView):
    """restart, optionally `{"from_step": "name"}`."""

    action = "restart"

    @extend_schema(
        request=s.RestartSerializer,
        parameters=[idempotency_header(False)],
        responses={200: s.ActionResultSerializer, **ERRORS},
    )
    @mutation("workflow_instance.restart")
    def post(self, request, name, instance_id):
        body = s.RestartSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        instance = actions.do_restart(
            instance=self.instance(),
            request=request,
            from_step=body.validated_data.get("from_step"),
        )
        return Response({"ok": True, "details": selectors.instance_details(instance)})


ACTION_SUMMARIES = {
    "pause": "Pause an instance (no new step starts)",
    "resume": "Resume a paused instance",
    "terminate": "Terminate an instance (nothing runs again)",
    "restart": "Restart an instance as a new run",
    "retry_now": "Retry the step waiting in backoff now (409 not_in_backoff)",
    "skip_wait": "End the current sleep now (409 not_sleeping)",
}
ACTION_VIEWS = {
    action: extend_schema_view(
        post=extend_schema(summary=summary, operation_id=f"workflows_instance_{action}")
    )(
        type(
            f"Instance{action.title().replace('_', '')}View",
            (InstanceRestartActionView if action == "restart" else InstanceActionView,),
            {"action": action},
        )
    )
    for action, summary in ACTION_SUMMARIES.items()
}


class InstanceEventView(WorkflowsView):
    scopes = {"POST": "events"}

    @extend_schema(
        request=s.EventCreateSerializer,
        parameters=[idempotency_header(False)],
        responses={200: s.EventResultSerializer, **ERRORS},
        summary="Send an event to an instance",
        operation_id="workflows_instance_event",
    )
    @mutation("workflow_instance.send_event")
    def post(self, request, name, instance_id):
        body = s.EventCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        instance = self.instance()
        actions.do_send_event(
            instance=instance,
            event_type=body.validated_data["type"],
            payload=body.validated_data.get("payload"),
            request=request,
        )
        instance.refresh_from_db()
        return Response({"details": selectors.instance_details(instance)})


class InstanceHistoryView(WorkflowsView):
    @extend_schema(
        parameters=[s.HistoryQuerySerializer],
        responses={200: s.HistorySerializer, **ERRORS},
        summary="Steps, events and (optionally) logs of one run, each with its own cursor",
        operation_id="workflows_instance_history",
    )
    def get(self, request, name, instance_id):
        query = s.HistoryQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        instance = self.instance()
        run = q.get("run_number") or instance.run_number
        lists = {
            "steps": selectors.instance_steps(instance=instance, run_number=run),
            "events": selectors.instance_events(instance=instance, run_number=run),
        }
        if q["include_logs"]:
            lists["logs"] = selectors.instance_logs(
                instance=instance,
                run_number=run,
                level=q.get("log_level"),
                category=q.get("log_category"),
            )
        body = {"run_number": run}
        for kind, queryset in lists.items():
            rows, body[f"{kind}_cursor"], body[f"{kind}_has_next_page"] = keyset_page(
                queryset,
                cursor=q.get(f"{kind}_cursor"),
                page_size=q["page_size"],
                descending=q["order"] == "desc",
                param=f"{kind}_cursor",
            )
            body[kind] = ROW_SERIALIZERS[kind](rows, many=True).data
        return Response(body)


class RunnerTickView(WorkflowsView):
    scopes = {"POST": "tick"}

    @extend_schema(
        request=s.TickSerializer,
        responses={200: s.TickResultSerializer, **ERRORS},
        summary="Run due workflow work once in this process",
        operation_id="workflows_runner_tick",
    )
    def post(self, request):
        body = s.TickSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        processed = actions.do_runner_tick(**body.validated_data, request=request)
        return Response({"processed": processed})


class ActiveVersionView(WorkflowsView):
    @extend_schema(
        responses={200: s.ActiveVersionSerializer, **ERRORS},
        summary="The active version",
        operation_id="workflows_version_active",
    )
    def get(self, request, name):
        return Response(active_version_body(name))


class ActivateVersionView(WorkflowsView):
    scopes = {"POST": "manage"}

    @extend_schema(
        request=None,
        parameters=[idempotency_header(False)],
        responses={200: s.ActiveVersionSerializer, **ERRORS},
        summary="Activate (or roll back to) a version",
        operation_id="workflows_version_activate",
    )
    @mutation("workflow.version_activate")
    def post(self, request, name, version):
        actions.do_activate_version(workflow_name=name, version=version, request=request)
        return Response(active_version_body(name))


class WorkflowSwitchView(WorkflowsView):
    """POST …/disable | …/enable (workflows.rollout): new instances refused or accepted again."""

    scopes = {"POST": "manage"}
    switch = action = "disable"  # as_view() sets both: the route and the audit action

    @extend_schema(
        request=None,
        parameters=[idempotency_header(False)],
        responses={200: s.ActiveVersionSerializer, **ERRORS},
        summary="Disable (refuse new instances) or enable a workflow",
    )
    @mutation("workflow.{action}")
    def post(self, request, name):
        action = (
            actions.do_disable_workflow if self.switch == "disable" else actions.do_enable_workflow
        )
        action(name=name, request=request)
        return Response(active_version_body(name))


class WorkflowDetailView(WorkflowsView):
    @extend_schema(
        responses={200: s.WorkflowDetailSerializer, **ERRORS},
        summary="One workflow: versions, schedules, concurrency, retention",
        operation_id="workflows_get",
    )
    def get(self, request, name):
        return Response(selectors.workflow_detail(workflow_name=name))


class SchedulesActionView(WorkflowsView):
    """pause | resume every cron schedule of a workflow (audited)."""

    scopes = {"POST": "manage"}
    action = "pause"

    @extend_schema(
        request=None,
        parameters=[idempotency_header(False)],
        responses={200: s.WorkflowDetailSerializer, **ERRORS},
    )
    @mutation("workflow.schedules_{action}")
    def post(self, request, name):
        actions.do_schedules(workflow_name=name, action=self.action, request=request)
        return Response(selectors.workflow_detail(workflow_name=name))


SCHEDULE_VIEWS = {
    action: extend_schema_view(
        post=extend_schema(
            summary=f"{action.capitalize()} a workflow's cron schedules",
            operation_id=f"workflows_schedules_{action}",
        )
    )(type(f"Schedules{action.capitalize()}View", (SchedulesActionView,), {"action": action}))
    for action in ("pause", "resume")
}
