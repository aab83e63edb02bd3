"""Response shapes ops owns for every app's API: a bulk job's progress (ops.models.BulkJob)."""

from rest_framework import serializers


class BulkJobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    filter = serializers.JSONField()
    state = serializers.CharField()
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    failed = serializers.IntegerField()
    actor = serializers.CharField()
    error = serializers.CharField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
