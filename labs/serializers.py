"""Output shapes of the labs API."""

from rest_framework import serializers

from labs.aliases import WIDE_CODES
from labs.models import BiomarkerWide, LabUpload


class LabUploadSerializer(serializers.ModelSerializer):
    upload_id = serializers.UUIDField(source="id", read_only=True)

    class Meta:
        model = LabUpload
        fields = [
            "upload_id",
            "storage_key",
            "original_name",
            "content_type",
            "size",
            "sha256",
            "metadata_removed",
            "terra_status",
            "terra_upload_id",
            "parsed_at",
            "instance_id",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class BiomarkerWideSerializer(serializers.ModelSerializer):
    class Meta:
        model = BiomarkerWide
        fields = ["id", "date", "updated_at", *WIDE_CODES]
        read_only_fields = fields


class UploadRequestSerializer(serializers.Serializer):
    """Documents the multipart body: one `file` part (PDF, PNG or JPEG)."""

    file = serializers.FileField()


class UploadAcceptedSerializer(serializers.Serializer):
    """Documents POST /v1/labs/upload's 202 answer: stored and recorded; the `lab-report`
    workflow instance `instance_id` forwards it to Terra and waits for the results."""

    upload_id = serializers.UUIDField()
    status = serializers.CharField(help_text="the upload's terra_status: pending")
    instance_id = serializers.CharField(help_text="the lab-report workflow instance")
