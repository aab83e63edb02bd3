"""Console pages for lab uploads (status filter, user search, staff download, pretty Terra answer,
"retry forwarding") and biomarkers (filters by code, status, source)."""

import json

from django.contrib import admin, messages
from django.core.files.storage import default_storage
from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html

from labs import services
from labs.models import Biomarker, LabUpload
from ops.console import HealthDataAdmin, confirmation_page, is_confirmed


class TerraStatusFilter(admin.SimpleListFilter):
    """Forward failures carry the HTTP status (failed:502…): grouped so one click finds them all."""

    title = "Terra status"
    parameter_name = "terra_status"

    def lookups(self, request, model_admin):
        return [
            ("pending", "pending"),
            ("submitted", "submitted"),
            ("forward_failed", "forward failed (retryable)"),
            ("failed:parse", "failed:parse (Terra could not read it)"),
            ("parsed", "parsed"),
        ]

    def queryset(self, request, queryset):
        value = self.value()
        if value == "forward_failed":
            return queryset.filter(terra_status__startswith="failed:").exclude(
                terra_status=services.FAILED_PARSE
            )
        if value:
            return queryset.filter(terra_status=value)
        return queryset


class BiomarkerInline(admin.TabularInline):
    """The markers Terra read from this upload, on its detail page."""

    model = Biomarker
    fields = ("code", "value", "value_text", "unit", "status", "measured_on", "raw_code")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(LabUpload)
class LabUploadAdmin(HealthDataAdmin):
    read_thing = "lab_upload"  # its page lists the markers read from it
    list_display = (
        "terra_status",
        "created_at",
        "user",
        "original_name",
        "content_type",
        "size",
        "terra_upload_id",
        "parsed_at",
    )
    list_filter = (TerraStatusFilter, "content_type", "created_at")
    search_fields = ("user__username", "user__email", "terra_upload_id", "original_name", "sha256")
    list_select_related = ("user",)
    actions = ["retry_forwarding"]
    inlines = [BiomarkerInline]
    fields = (
        "id",
        "user",
        "terra_status",
        "workflow_instance",
        "download",
        "storage_key",
        "original_name",
        "content_type",
        "size",
        "sha256",
        "metadata_removed",
        "terra_upload_id",
        "parsed_at",
        "created_at",
        "updated_at",
        "terra_response_pretty",
    )
    # Uploads arrive through POST /v1/labs/upload only, and deleting a row would orphan its
    # stored file (the user wipe removes both): read-only.
    readonly_fields = fields

    def get_urls(self):
        download = path(
            "<uuid:upload_id>/download/",
            self.admin_site.admin_view(self.download_view),
            name="labs_labupload_download",
        )
        return [download, *super().get_urls()]

    def download_view(self, request, upload_id):
        if not (request.user.is_staff and self.has_view_permission(request)):
            raise Http404
        upload = get_object_or_404(LabUpload, pk=upload_id)
        try:
            stored = default_storage.open(upload.storage_key, "rb")
        except FileNotFoundError:
            raise Http404("The stored file is missing.") from None
        self.audit_read(request, [upload], resource=f"lab_upload:{upload.pk}")
        extension = upload.storage_key.rsplit(".", 1)[-1]
        return FileResponse(
            stored,
            as_attachment=True,
            filename=f"{upload.pk}.{extension}",
            content_type=upload.content_type,
        )

    @admin.display(description="stored file")
    def download(self, obj):
        url = reverse("admin:labs_labupload_download", args=[obj.pk])
        return format_html('<a href="{}">download ({} bytes)</a>', url, obj.size)

    @admin.display(description="workflow instance")
    def workflow_instance(self, obj):
        from workflows.models import WorkflowInstance

        if not obj.instance_id:
            return "—"
        pk = (
            WorkflowInstance.objects.filter(
                workflow_name=services.LAB_WORKFLOW, instance_id=obj.instance_id
            )
            .values_list("pk", flat=True)
            .first()
        )
        if pk is None:
            return obj.instance_id
        url = reverse("admin:workflows_workflowinstance_change", args=[pk])
        return format_html('<a href="{}">lab-report / {}</a>', url, obj.instance_id)

    @admin.display(description="Terra response")
    def terra_response_pretty(self, obj):
        if obj.terra_response is None:
            return "—"
        return format_html(
            "<pre>{}</pre>", json.dumps(obj.terra_response, indent=2, sort_keys=True)
        )

    @admin.action(description="Retry forwarding to Terra (failed uploads)…")
    def retry_forwarding(self, request, queryset):
        uploads = list(queryset.select_related("user"))
        eligible = [u for u in uploads if services.is_forward_failed(u)]
        if not is_confirmed(request):
            return confirmation_page(
                request,
                model=LabUpload,
                title="Retry forwarding to Terra",
                explanation="Uploads that failed to reach Terra will be forwarded again.",
                columns=("user", "file", "Terra status", "uploaded"),
                rows=[
                    (u.user, u.original_name or u.pk, u.terra_status, u.created_at)
                    for u in eligible
                ],
                ignored=len(uploads) - len(eligible),
                submit="Yes, forward them again",
                action="retry_forwarding",
                enabled=bool(eligible),
            )
        counts = services.lab_uploads_retry_forwarding(uploads=uploads, request=request)
        self.report(
            request,
            f"Retried {counts['retried']} upload(s): {counts['submitted']} submitted, "
            f"{counts['failed']} failed again; {counts['ignored']} not in a failed state, left alone.",
            objects=eligible,
            level=messages.SUCCESS if counts["failed"] == 0 else messages.WARNING,
        )
        return None


@admin.register(Biomarker)
class BiomarkerAdmin(HealthDataAdmin):
    read_thing = "biomarker"
    audit_list = True  # the list shows values
    list_display = (
        "measured_on",
        "user",
        "code",
        "value",
        "value_text",
        "unit",
        "status",
        "source",
        "lab_upload",
    )
    list_filter = ("code", "status", "source")
    search_fields = ("user__username", "code", "raw_code", "name")
    list_select_related = ("user", "lab_upload")
    date_hierarchy = "measured_on"
    readonly_fields = [f.name for f in Biomarker._meta.fields]
