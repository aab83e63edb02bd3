"""Console pages for API keys, user tokens, the audit log and bulk jobs' progress."""

import json

from django.contrib import admin
from django.core.exceptions import ObjectDoesNotExist
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from ops.console import ReadOnlyAdmin, console_report, time_range_filter
from ops.models import ApiKey, AuditLog, BulkJob, UserToken
from ops.services import actor_for, api_key_revoke


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("name", "prefix", "scopes", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("name", "prefix")
    readonly_fields = ("prefix", "key_hash", "created_at", "last_used_at", "revoked_at")
    actions = ["revoke_selected"]

    def has_add_permission(self, request):
        return False  # keys are minted by `manage.py create_api_key` so the raw key is shown once

    @admin.action(description="Revoke selected keys")
    def revoke_selected(self, request, queryset):
        keys = list(queryset.filter(revoked_at__isnull=True))
        for key in keys:
            api_key_revoke(key=key, actor=actor_for(request))
        console_report(request, f"Revoked {len(keys)} key(s).", objects=keys)


@admin.register(UserToken)
class UserTokenAdmin(admin.ModelAdmin):
    list_display = ("user", "name", "prefix", "created_at", "last_used_at", "revoked_at")
    search_fields = ("user__username", "prefix")
    readonly_fields = ("prefix", "token_hash", "created_at", "last_used_at")


@admin.register(AuditLog)
class AuditLogAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at",
        "actor",
        "action",
        "user_concerned",
        "count",
        "last_at",
        "resource",
        "result",
        "deduplicated",
        "request_id",
    )
    list_filter = (
        "action",
        "result",
        "deduplicated",
        "created_at",
        time_range_filter("created_at", "time (UTC)"),
    )
    search_fields = ("actor", "resource", "request_id", "idempotency_key", "=subject__username")
    search_help_text = (
        "actor, resource, request id, idempotency key, or the exact username of the user concerned"
    )
    readonly_fields = [f.name for f in AuditLog._meta.fields if f.name != "subject"] + [
        "user_concerned"
    ]
    exclude = ("subject",)
    list_select_related = ("subject",)

    def lookup_allowed(self, lookup, value, request=None):
        # The user overview links here by the user's id (it outlives the user: a wipe keeps it).
        if lookup in ("subject__id__exact", "subject_id", "subject__username"):
            return True
        return super().lookup_allowed(lookup, value, request)

    @admin.display(description="user concerned", ordering="subject_id")
    def user_concerned(self, obj):
        # By id: the user may be gone (wiped), and the id is all the row keeps of them.
        if obj.subject_id is None:
            return "—"
        url = reverse("admin:ops_auditlog_changelist") + f"?subject__id__exact={obj.subject_id}"
        try:
            user = obj.subject  # joined on the list (None when the user is gone)
        except ObjectDoesNotExist:  # a detail page of a row whose user was wiped
            user = None
        name = user.get_username() if user is not None else "gone"
        return format_html('<a href="{}">{} (#{})</a>', url, name, obj.subject_id)


@admin.register(BulkJob)
class BulkJobAdmin(ReadOnlyAdmin):
    """Jobs started from a list's "… every row matching" page (ops.bulk_pages); one job's page
    is its progress, reloading itself while it runs."""

    list_display = ("id", "kind", "state", "progress", "failed", "actor", "created_at")
    list_filter = ("state", "kind")
    ordering = ("-id",)

    @admin.display(description="progress")
    def progress(self, obj):
        return f"{obj.handled}/{obj.total}"

    def change_view(self, request, object_id, form_url="", extra_context=None):
        job = get_object_or_404(BulkJob, pk=object_id)
        live = job.state in (BulkJob.State.QUEUED, BulkJob.State.RUNNING)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Bulk job {job.pk}",
            "job": job,
            "live": live,
            "filter_json": json.dumps(job.filter, sort_keys=True),
        }
        return TemplateResponse(request, "admin/ops/bulkjob_progress.html", context)
