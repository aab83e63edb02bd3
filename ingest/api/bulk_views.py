"""Replaying raw events by filter over the operator API: `POST /v1/admin/raw-events/bulk-replay`
counts what a filter matches (`"dry_run": true`) or starts a tracked job (202), and
`GET /v1/admin/bulk-jobs/<id>` reports a replay job's progress (docs/workflows/actions.md)."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from ingest import bulk as raw_bulk
from ingest.actions import do_raw_events_bulk_replay
from ingest.api.admin_views import TAGS, OperatorView, _validated
from ingest.errors import BulkJobNotFound
from ops.models import BulkJob
from ops.serializers import BulkJobSerializer


class BulkReplayFilter(serializers.Serializer):
    state = serializers.ListField(child=serializers.CharField(), required=False)
    type = serializers.CharField(required=False)
    provider = serializers.CharField(required=False)
    error = serializers.CharField(required=False)
    terra_user_id = serializers.CharField(required=False)
    # Strings: ingest.bulk validates them (400 invalid_filter) for the API and the console.
    since = serializers.CharField(required=False, help_text="received at or after (ISO)")
    until = serializers.CharField(required=False, help_text="received before (ISO)")
    newer_than = serializers.CharField(required=False, help_text='e.g. "2h": fixed when asked')


class BulkReplayRequest(serializers.Serializer):
    filter = BulkReplayFilter()
    dry_run = serializers.BooleanField(default=False, help_text="only count, start nothing")


class BulkReplayCount(serializers.Serializer):
    filter = serializers.JSONField()
    count = serializers.IntegerField()


class BulkReplayView(OperatorView):
    @extend_schema(
        tags=TAGS,
        request=BulkReplayRequest,
        responses={200: BulkReplayCount, 202: BulkJobSerializer},
        summary="Replay every raw event a filter matches, as a tracked job",
    )
    def post(self, request):
        body = _validated(BulkReplayRequest, request.data)
        raw = request.data["filter"]
        if body["dry_run"]:
            filters = raw_bulk.bulk_filters_clean(raw)
            count = raw_bulk.raw_events_matching(filters).order_by().count()
            return Response({"filter": filters, "count": count})
        job = do_raw_events_bulk_replay(filters=raw, request=request)
        return Response(BulkJobSerializer(job).data, status=202)


class BulkJobView(OperatorView):
    @extend_schema(tags=TAGS, responses={200: BulkJobSerializer}, summary="A replay job's progress")
    def get(self, request, job_id: int):
        job = BulkJob.objects.filter(pk=job_id, kind=raw_bulk.KIND).first()
        if job is None:
            raise BulkJobNotFound(f"No raw-event bulk job {job_id}.")
        return Response(BulkJobSerializer(job).data)
