"""Console pages for API keys, user tokens and the audit log."""

from django.contrib import admin

from ops.console import ReadOnlyAdmin, console_report
from ops.models import ApiKey, AuditLog, UserToken
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
        "resource",
        "result",
        "deduplicated",
        "request_id",
    )
    list_filter = ("action", "result", "deduplicated", "created_at")
    search_fields = ("actor", "resource", "request_id", "idempotency_key")
