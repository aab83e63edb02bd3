"""Labs API: upload a lab report, list and read one's uploads, the wide biomarker table."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework.generics import ListAPIView
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from labs import services
from labs.filters import BiomarkerWideFilter
from labs.models import BiomarkerWide, LabUpload
from labs.serializers import (
    BiomarkerWideSerializer,
    LabUploadSerializer,
    UploadAcceptedSerializer,
    UploadRequestSerializer,
)
from labs.upload import install_upload_handlers, lab_file_from_request
from ops.auth import IsEndUser
from ops.pagination import KeysetPagination


class NewestFirst(KeysetPagination):
    items_key = "uploads"
    ordering = "-created_at"
    page_size = 50


class NewestDayFirst(KeysetPagination):
    items_key = "days"
    ordering = "-date"
    page_size = 100


class LabUploadView(APIView):
    permission_classes = [IsEndUser]
    parser_classes = [MultiPartParser]

    def initialize_request(self, request, *args, **kwargs):
        install_upload_handlers(request)  # before authentication can touch request.POST
        return super().initialize_request(request, *args, **kwargs)

    @extend_schema(
        tags=["labs"],
        request={"multipart/form-data": UploadRequestSerializer},
        responses={202: UploadAcceptedSerializer},
        summary="Upload a lab report (PDF, PNG or JPEG); its lab-report workflow forwards it",
    )
    def post(self, request):
        upload = services.lab_upload_receive(
            user=request.user, uploaded=lab_file_from_request(request)
        )
        body = {
            "upload_id": str(upload.pk),
            "status": upload.terra_status,
            "instance_id": upload.instance_id,
        }
        return Response(body, status=202)


@extend_schema(tags=["labs"], summary="My lab uploads, newest first")
class LabUploadListView(ListAPIView):
    permission_classes = [IsEndUser]
    queryset = LabUpload.objects.none()  # the real one is per user: get_queryset
    serializer_class = LabUploadSerializer
    pagination_class = NewestFirst
    filter_backends: list = []

    def get_queryset(self):
        return services.lab_uploads_for(user=self.request.user)


class LabUploadDetailView(APIView):
    permission_classes = [IsEndUser]

    @extend_schema(tags=["labs"], responses={200: LabUploadSerializer})
    def get(self, request, upload_id):
        # Another user's upload is a 404, not a 403: its existence is not disclosed.
        upload = get_object_or_404(services.lab_uploads_for(user=request.user), pk=upload_id)
        return Response(LabUploadSerializer(upload).data)


@extend_schema(tags=["labs"], summary="My biomarkers, one row per day, one column per code")
class BiomarkerWideView(ListAPIView):
    permission_classes = [IsEndUser]
    queryset = BiomarkerWide.objects.none()  # the real one is per user: get_queryset
    serializer_class = BiomarkerWideSerializer
    pagination_class = NewestDayFirst
    filterset_class = BiomarkerWideFilter

    def get_queryset(self):
        return BiomarkerWide.objects.filter(user=self.request.user)
