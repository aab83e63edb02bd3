"""User-facing endpoints (bearer token): connect a wearable, see my connections and imports,
start an import, pull my data (sync), and take all of it with me (export)."""

import tempfile

from django.http import FileResponse, HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.response import Response
from rest_framework.views import APIView

from ingest.api import serializers as s
from ingest.connections import connection_widget_session, connections_reconcile_spaced
from ingest.errors import TerraUnavailable
from ingest.export import export_allowed, user_export_write
from ingest.imports import import_job_refresh, import_job_summary, import_start, parse_days
from ingest.models import TerraConnection
from ingest.sync import parse_limit, sync_page
from ingest.terra.client import TerraError, TerraNetworkError
from ops.access import audit_read
from ops.auth import IsEndUser
from ops.errors import ApiError, ErrorCode
from ops.throttling import throttled

USER_TAGS = ["user"]


def _body(request) -> dict:
    if not isinstance(request.data, dict):
        raise ApiError(400, ErrorCode.INVALID_REQUEST, "The body must be a JSON object.")
    return request.data


class UserView(APIView):
    permission_classes = [IsEndUser]


class ConnectView(UserView):
    @extend_schema(
        tags=USER_TAGS,
        request=s.ConnectRequest,
        responses={200: s.ConnectResponse},
        summary="Terra widget URL to connect a wearable",
    )
    def post(self, request):
        provider = _body(request).get("provider") or None
        if provider is not None and not isinstance(provider, str):
            raise ApiError(400, ErrorCode.INVALID_REQUEST, "provider must be a string.")
        try:
            session = connection_widget_session(user=request.user, provider=provider)
        except (TerraError, TerraNetworkError) as exc:
            raise TerraUnavailable(str(exc)[:300]) from None
        return Response({**session, "reference_id": request.user.username})


class MeView(UserView):
    @extend_schema(
        tags=USER_TAGS,
        responses={200: s.MeResponse},
        summary="Me, my connections (reconciled with Terra first) and my recent imports",
    )
    def get(self, request):
        user = request.user
        reconcile = connections_reconcile_spaced(user=user)
        connections = TerraConnection.objects.filter(user=user).order_by("-created_at")
        jobs = [import_job_refresh(job=j) for j in user.import_jobs.order_by("-created_at")[:5]]
        return Response(
            {
                "username": user.username,
                "email": user.email,
                "connections": s.ConnectionOut(connections, many=True).data,
                "reconcile": reconcile.as_dict(),
                "imports": [import_job_summary(j) for j in jobs],
            }
        )


class ImportView(UserView):
    @extend_schema(
        tags=USER_TAGS,
        request=s.ImportRequest,
        responses={202: s.ImportResponse},
        summary="Import history: one Terra backfill per active connection × type",
    )
    def post(self, request):
        days = parse_days(_body(request).get("days"))
        job = import_start(user=request.user, days=days)
        return Response({**import_job_summary(job), "requested": job.requested}, status=202)


class SyncView(UserView):
    @extend_schema(
        tags=USER_TAGS,
        parameters=[
            OpenApiParameter("since", OpenApiTypes.DATETIME, description="ISO 8601"),
            OpenApiParameter("cursor", OpenApiTypes.STR, description="`next` of the last page"),
            OpenApiParameter("limit", OpenApiTypes.INT, description="rows per page (≤ 2000)"),
        ],
        responses={200: s.SyncResponse},
        summary="Everything of mine changed since `since`, cursor-paginated",
    )
    def get(self, request):
        page = sync_page(
            user=request.user,
            since=request.query_params.get("since"),
            cursor=request.query_params.get("cursor"),
            limit=parse_limit(request.query_params.get("limit")),
        )
        # Rows arrive as JSON text (written by the database on PostgreSQL): pass them through
        # rather than parse and re-encode them with DRF's renderer.
        return HttpResponse(page.render(), content_type="application/json")


class FirstRenderer(BaseContentNegotiation):
    """The archive is the answer whatever Accept says (errors are JSON): DRF's documented way to
    ignore the client's Accept header."""

    def select_parser(self, request, parsers):
        return parsers[0]

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class ExportView(UserView):
    content_negotiation_class = FirstRenderer

    @extend_schema(
        tags=USER_TAGS,
        responses={(200, "application/zip"): OpenApiTypes.BINARY},
        summary="Everything stored about me, as one zip archive (layout in its README.txt)",
    )
    def get(self, request):
        if (wait := export_allowed(user=request.user)) is not None:
            raise throttled(wait)
        # Built in a temporary file on disk, then streamed from it: memory stays flat, and a
        # failure answers an error instead of half an archive. FileResponse closes it.
        archive = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            user_export_write(user=request.user, out=archive)
            audit_read(
                request=request,
                thing="export",
                subjects=request.user,
                resource=f"user:{request.user.pk}",
            )
        except BaseException:
            archive.close()
            raise
        archive.seek(0)
        name = f"vitalflow-export-{timezone.now():%Y%m%d}.zip"
        return FileResponse(archive, as_attachment=True, filename=name)
