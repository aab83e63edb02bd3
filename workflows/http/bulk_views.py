"""Bulk actions over the HTTP API: `POST /v1/workflows/<name>/instances/bulk/<action>` with a
filter counts the instances it matches (`"dry_run": true`) or starts a tracked job (202), and
`GET /v1/workflows/_bulk/<job>` reports its progress. Rules in docs/workflows/actions.md."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from ops.models import BulkJob
from ops.serializers import BulkJobSerializer
from workflows import actions
from workflows.bulk import BULK_ACTIONS, bulk_filters_clean, instances_matching
from workflows.errors import BulkJobNotFound, InvalidBulkFilter
from workflows.http.permissions import policy_check
from workflows.http.views import ERRORS, WorkflowsView, require_known_workflow


class BulkFilterSerializer(serializers.Serializer):
    status = serializers.ListField(child=serializers.CharField(), required=False)
    version = serializers.IntegerField(required=False)
    # Strings here: workflows.bulk validates them (400 invalid_filter) for the API and the console.
    since = serializers.CharField(required=False, help_text="created at or after (ISO)")
    until = serializers.CharField(required=False, help_text="created before (ISO)")
    newer_than = serializers.CharField(required=False, help_text='e.g. "1h": fixed when asked')
    label = serializers.ListField(child=serializers.CharField(), required=False)


class BulkRequestSerializer(serializers.Serializer):
    filter = BulkFilterSerializer(required=False, default=dict)
    dry_run = serializers.BooleanField(default=False, help_text="only count, start nothing")


class BulkCountSerializer(serializers.Serializer):
    action = serializers.CharField()
    filter = serializers.JSONField()
    count = serializers.IntegerField()


class BulkActionView(WorkflowsView):
    scopes = {"POST": "manage"}

    @extend_schema(
        request=BulkRequestSerializer,
        responses={200: BulkCountSerializer, 202: BulkJobSerializer, **ERRORS},
        summary="Pause/resume/terminate/restart every instance a filter matches, as a job",
        operation_id="workflows_instances_bulk",
    )
    def post(self, request, name, action):
        if action not in BULK_ACTIONS:
            raise InvalidBulkFilter(
                f"bulk action must be one of {list(BULK_ACTIONS)}, got {action!r}"
            )
        require_known_workflow(name)
        policy_check(request, operation="manage", workflow_name=name)
        body = BulkRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        raw = {**request.data.get("filter", {}), "workflow": name}
        if body.validated_data["dry_run"]:
            filters = bulk_filters_clean(raw)
            count = instances_matching(filters, action).count()
            return Response({"action": action, "filter": filters, "count": count})
        job = actions.do_bulk(action=action, filters=raw, request=request)
        return Response(BulkJobSerializer(job).data, status=202)


class BulkJobView(WorkflowsView):
    @extend_schema(
        responses={200: BulkJobSerializer, **ERRORS},
        summary="A bulk job's progress",
        operation_id="workflows_bulk_job",
    )
    def get(self, request, job_id):
        job = BulkJob.objects.filter(pk=job_id, kind__in=BULK_ACTIONS.values()).first()
        if job is None:
            raise BulkJobNotFound(f"no workflows bulk job {job_id}")
        return Response(BulkJobSerializer(job).data)
