"""Operator endpoints under /v1/admin (X-Admin-Key with scope ingest:admin, or a staff session):
DLQ, raw events, drain, replay, users (overview, wipe), traces."""

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from ingest.actions import do_raw_events_drain, do_raw_events_replay, do_user_wipe
from ingest.api import serializers as s
from ingest.errors import InvalidLimit
from ingest.imports import import_job_summary
from ingest.selectors import (
    dlq_rows,
    raw_event_get,
    raw_event_subject_id,
    raw_events,
    trace_subject_id,
    traces,
    user_get,
    user_overview,
)
from ops.access import audit_read
from ops.auth import scope_required
from ops.pagination import keyset_page_by_time, list_body

SCOPE = "ingest:admin"
TAGS = ["operator"]
DLQ_DEFAULT, DLQ_MAX = 50, 200
TRACE_PAGE, TRACE_PAGE_MAX = 100, 500


def _int_param(request, name: str, default: int, maximum: int) -> int:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= maximum:
        raise InvalidLimit(f"{name} must be 1…{maximum}.")
    return int(raw)


def _validated(serializer_class, data):
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def trace_subjects(rows) -> set[int]:
    return {trace_subject_id(row) for row in rows} - {None}


class OperatorView(APIView):
    permission_classes = [scope_required(SCOPE)]


class DlqView(OperatorView):
    @extend_schema(
        tags=TAGS,
        parameters=[
            OpenApiParameter("type", OpenApiTypes.STR),
            OpenApiParameter("error", OpenApiTypes.STR, description="substring of the error"),
            OpenApiParameter("older_than", OpenApiTypes.STR, description="e.g. 2h, 7d"),
            OpenApiParameter("newer_than", OpenApiTypes.STR),
            OpenApiParameter("state", OpenApiTypes.STR, description="parked|retrying|dead"),
            OpenApiParameter("limit", OpenApiTypes.INT, description="default 50, max 200"),
        ],
        responses={200: s.DlqResponse},
        summary="Newest parked, retrying and dead rows (never skipped)",
    )
    def get(self, request):
        limit = _int_param(request, "limit", DLQ_DEFAULT, DLQ_MAX)
        filters = request.query_params.copy()
        for key in ("limit", "cursor"):
            filters.pop(key, None)
        rows, cursor, more = keyset_page_by_time(
            dlq_rows(filters=filters),
            field="received_at",
            cursor=request.query_params.get("cursor"),
            page_size=limit,
        )
        data = s.DlqRow(rows, many=True, context={"now": timezone.now()}).data
        return Response(list_body("raw_events", data, cursor, more))


class RawEventView(OperatorView):
    @extend_schema(tags=TAGS, responses={200: s.RawEventDetail}, summary="One raw event in full")
    def get(self, request, raw_event_id: int):
        row = raw_event_get(raw_event_id=raw_event_id)
        audit_read(
            request=request,
            thing="raw_event",
            subjects=raw_event_subject_id(row),
            resource=f"raw_event:{row.pk}",
        )
        return Response(s.RawEventDetail(row).data)


class RawEventReplayView(OperatorView):
    @extend_schema(
        tags=TAGS, request=None, responses={200: s.ReplayResponse}, summary="Replay one row"
    )
    def post(self, request, raw_event_id: int):
        row = raw_event_get(raw_event_id=raw_event_id)
        count = do_raw_events_replay(ids=[row.pk], request=request)
        return Response({"replayed": count, "ids": [row.pk]})


class ReplayView(OperatorView):
    @extend_schema(
        tags=TAGS,
        request=s.ReplayRequest,
        responses={200: s.ReplayResponse},
        summary="Replay rows by ids, or the newest `limit` rows matching a filter",
    )
    def post(self, request):
        body = _validated(s.ReplayRequest, request.data)
        if body.get("ids"):
            ids = body["ids"]
        else:
            ids = list(
                raw_events(filters=body["filter"]).values_list("id", flat=True)[: body["limit"]]
            )
        if not ids:
            return Response({"replayed": 0, "ids": []})
        count = do_raw_events_replay(ids=ids, request=request)
        return Response({"replayed": count, "ids": sorted(set(ids))})


class DrainView(OperatorView):
    @extend_schema(
        tags=TAGS,
        request=s.DrainRequest,
        responses={200: s.DrainResponse},
        summary="Re-enqueue up to `limit` stuck rows (not skipped / no-connection by default)",
    )
    def post(self, request):
        body = _validated(s.DrainRequest, request.data)
        return Response(do_raw_events_drain(**body, request=request).as_dict())


class UserOverviewView(OperatorView):
    @extend_schema(tags=TAGS, responses={200: s.UserOverviewResponse}, summary="One user")
    def get(self, request, username: str):
        info = user_overview(user=user_get(username=username))
        user = info.pop("user")
        audit_read(request=request, thing="user", subjects=user, resource=f"user:{user.pk}")
        return Response(
            {
                "username": user.username,
                "email": user.email,
                "is_active": user.is_active,
                "date_joined": user.date_joined,
                **info,
                "connections": s.ConnectionOut(info["connections"], many=True).data,
                "imports": [import_job_summary(j) for j in info["imports"]],
            }
        )


class UserWipeView(OperatorView):
    @extend_schema(
        tags=TAGS,
        request=None,
        responses={200: s.WipeResponse},
        summary="Delete all of a user's data, their stored files, and the user",
    )
    def post(self, request, username: str):
        counts = do_user_wipe(user=user_get(username=username), request=request)
        return Response({"username": username, "deleted": counts})


class TracesView(OperatorView):
    @extend_schema(
        tags=TAGS,
        parameters=[
            OpenApiParameter("request_id", OpenApiTypes.STR),
            OpenApiParameter("user", OpenApiTypes.STR, description="username"),
            OpenApiParameter("level", OpenApiTypes.STR),
            OpenApiParameter("raw_event_id", OpenApiTypes.INT),
            OpenApiParameter("event", OpenApiTypes.STR),
            OpenApiParameter("cursor", OpenApiTypes.STR),
            OpenApiParameter("limit", OpenApiTypes.INT, description="default 100, max 500"),
        ],
        responses={200: s.TracePage},
        summary="Trace rows, newest first",
    )
    def get(self, request):
        limit = _int_param(request, "limit", TRACE_PAGE, TRACE_PAGE_MAX)
        filters = request.query_params.copy()
        for key in ("limit", "cursor"):
            filters.pop(key, None)
        rows, cursor, more = keyset_page_by_time(
            traces(filters=filters),
            field="created_at",
            cursor=request.query_params.get("cursor"),
            page_size=limit,
        )
        audit_read(request=request, thing="trace_event", subjects=trace_subjects(rows))
        return Response(list_body("traces", s.TraceRow(rows, many=True).data, cursor, more))
