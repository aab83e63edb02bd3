"""The workflows console (Procrastinate-style): read-only lists, status first; an instance page
with a timeline; pause/resume/terminate/restart on eligible rows only (confirmation before
terminate/restart); a send-event form; and a per-workflow overview with "activate version".

Every action goes through workflows.http.operations, which calls the engine and writes the
audit row, exactly as the HTTP API does."""

import json
from datetime import timedelta

from django.contrib import admin, messages
from django.db.models import Count
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from ops import strict_json
from ops.errors import ApiError
from workflows import runtime
from workflows.authoring import registry
from workflows.http import operations
from workflows.http.permissions import policy_check
from workflows.http.timeline import timeline
from workflows.models import TERMINAL_STATUSES, WorkflowDeployment, WorkflowInstance

# Which statuses each action may touch; others are skipped and counted, never sent.
ELIGIBLE = {
    "pause": ("active", "waiting"),
    "resume": ("paused",),
    "terminate": ("active", "waiting", "paused"),
    "restart": ("active", "waiting", "paused", "errored", "terminated", "complete"),
}
CONFIRM = ("terminate", "restart")
STATUS_COLORS = {
    "active": "#2563eb",
    "waiting": "#7c3aed",
    "paused": "#b45309",
    "errored": "#dc2626",
    "terminated": "#6b7280",
    "complete": "#16a34a",
}


def _policy(request, operation: str, instance) -> None:
    """The deployment's WORKFLOWS_POLICIES apply to the console as they do to the API."""
    policy_check(
        request,
        operation=operation,
        workflow_name=instance.workflow_name,
        instance_id=instance.instance_id,
    )


def pretty(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


class AgeFilter(admin.SimpleListFilter):
    title = "age"
    parameter_name = "age"
    WINDOWS = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7)}

    def lookups(self, request, model_admin):
        return [
            ("1h", "last hour"),
            ("24h", "last 24 hours"),
            ("7d", "last 7 days"),
            ("old", "older"),
        ]

    def queryset(self, request, queryset):
        # The engine's clock wrote created_at, so age is measured on it too.
        value, now = self.value(), runtime.now()
        if value in self.WINDOWS:
            return queryset.filter(created_at__gte=now - self.WINDOWS[value])
        if value == "old":
            return queryset.filter(created_at__lt=now - self.WINDOWS["7d"])
        return queryset


class WorkflowFilter(admin.SimpleListFilter):
    """Names from the registry and the pointers, not SELECT DISTINCT over every instance."""

    title = "workflow"
    parameter_name = "workflow_name"

    def lookups(self, request, model_admin):
        stored = WorkflowDeployment.objects.values_list("workflow_name", flat=True)
        return [(name, name) for name in sorted(set(registry.names()) | set(stored))]

    def queryset(self, request, queryset):
        return queryset.filter(workflow_name=self.value()) if self.value() else queryset


class VersionFilter(admin.SimpleListFilter):
    title = "version"
    parameter_name = "version"

    def lookups(self, request, model_admin):
        name = request.GET.get("workflow_name")
        versions = (
            registry.versions(name)
            if name
            else {v for n in registry.names() for v in registry.versions(n)}
        )
        return [(str(v), f"v{v}") for v in sorted(versions)]

    def queryset(self, request, queryset):
        if self.value() and self.value().isdigit():
            return queryset.filter(version=int(self.value()))
        return queryset


@admin.register(WorkflowInstance)
class WorkflowInstanceAdmin(admin.ModelAdmin):
    list_display = (
        "status_badge",
        "workflow_name",
        "instance_id",
        "version_label",
        "run_number",
        "created_at",
        "updated_at",
    )
    list_display_links = ("instance_id",)
    list_filter = ("status", WorkflowFilter, VersionFilter, AgeFilter)
    search_fields = ("=instance_id", "instance_id__startswith")
    ordering = ("-id",)
    show_full_result_count = False  # no COUNT(*) over a big table on every page
    list_per_page = 50
    actions = ["pause_selected", "resume_selected", "terminate_selected", "restart_selected"]
    change_form_template = "admin/workflows/instance_detail.html"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj):
        return format_html(
            '<b style="color:{}">{}</b>', STATUS_COLORS.get(obj.status, "inherit"), obj.status
        )

    @admin.display(description="version", ordering="version")
    def version_label(self, obj):
        if registry.get(obj.workflow_name, obj.version) is None:
            return format_html('v{} <b style="color:#dc2626">version_missing</b>', obj.version)
        return f"v{obj.version}"

    # --- bulk actions -----------------------------------------------------------------------

    def _bulk(self, request, queryset, action: str):
        eligible = list(queryset.filter(status__in=ELIGIBLE[action]))
        skipped = queryset.count() - len(eligible)
        if action in CONFIRM and request.POST.get("confirmed") != "yes":
            return TemplateResponse(
                request,
                "admin/workflows/confirm_action.html",
                {
                    **self.admin_site.each_context(request),
                    "opts": self.model._meta,
                    "title": f"{action.capitalize()} {len(eligible)} instance(s)?",
                    "action": action,
                    "bulk_action": f"{action}_selected",
                    "instances": eligible,
                    "skipped": skipped,
                    "ids": [obj.pk for obj in queryset],
                },
            )
        done, failed = 0, []
        for instance in eligible:
            try:
                _policy(request, "manage", instance)
                operations.instance_action(instance=instance, action=action, request=request)
                done += 1
            except ApiError as exc:
                failed.append(f"{instance.instance_id}: {exc.code}")
        text = f"{action.capitalize()}: {done} instance(s) done, {skipped} not eligible skipped"
        if failed:
            text += f", {len(failed)} refused ({'; '.join(failed[:5])})"
        self.message_user(request, text + ".", messages.WARNING if failed else messages.SUCCESS)
        return None

    @admin.action(description="Pause selected (active/waiting)")
    def pause_selected(self, request, queryset):
        return self._bulk(request, queryset, "pause")

    @admin.action(description="Resume selected (paused)")
    def resume_selected(self, request, queryset):
        return self._bulk(request, queryset, "resume")

    @admin.action(description="Terminate selected (not finished) …")
    def terminate_selected(self, request, queryset):
        return self._bulk(request, queryset, "terminate")

    @admin.action(description="Restart selected …")
    def restart_selected(self, request, queryset):
        return self._bulk(request, queryset, "restart")

    # --- instance page: timeline, single actions, send event --------------------------------

    def get_urls(self):
        custom = [
            path(
                "<int:pk>/do/<str:action>/",
                self.admin_site.admin_view(self.single_action_view),
                name="workflows_instance_action",
            ),
            path(
                "<int:pk>/send-event/",
                self.admin_site.admin_view(self.send_event_view),
                name="workflows_instance_send_event",
            ),
        ]
        return custom + super().get_urls()

    def change_view(self, request, object_id, form_url="", extra_context=None):
        instance = get_object_or_404(WorkflowInstance, pk=object_id)
        run = int(request.GET.get("run") or instance.run_number)
        context = {
            "instance": instance,
            "run": run,
            "runs": range(instance.run_number, 0, -1),
            "timeline": timeline(instance=instance, run_number=run),
            "params_json": pretty(instance.params),
            "output_json": pretty(instance.output) if instance.output is not None else None,
            "error_json": pretty(instance.error) if instance.error else None,
            "version_missing": registry.get(instance.workflow_name, instance.version) is None,
            "eligible": [a for a, ok in ELIGIBLE.items() if instance.status in ok],
            "can_send_event": instance.status not in TERMINAL_STATUSES,
            "status_color": STATUS_COLORS.get(instance.status),
        }
        return super().change_view(
            request, object_id, form_url, {**context, **(extra_context or {})}
        )

    def _back(self, instance):
        return HttpResponseRedirect(
            reverse("admin:workflows_workflowinstance_change", args=[instance.pk])
        )

    def single_action_view(self, request, pk: int, action: str):
        instance = get_object_or_404(WorkflowInstance, pk=pk)
        if action not in ELIGIBLE:
            self.message_user(request, f"Unknown action {action!r}.", messages.ERROR)
            return self._back(instance)
        if request.method != "POST" or (
            action in CONFIRM and request.POST.get("confirmed") != "yes"
        ):
            return TemplateResponse(
                request,
                "admin/workflows/confirm_action.html",
                {
                    **self.admin_site.each_context(request),
                    "opts": self.model._meta,
                    "title": f"{action.capitalize()} {instance.instance_id}?",
                    "action": action,
                    "instances": [instance],
                    "skipped": 0,
                },
            )
        try:
            _policy(request, "manage", instance)
            operations.instance_action(instance=instance, action=action, request=request)
            instance.refresh_from_db()
            self.message_user(
                request,
                f"{action.capitalize()}: 1 instance, now {instance.status}.",
                messages.SUCCESS,
            )
        except ApiError as exc:
            self.message_user(
                request, f"{action} refused: {exc.code}: {exc.message}", messages.ERROR
            )
        return self._back(instance)

    def send_event_view(self, request, pk: int):
        instance = get_object_or_404(WorkflowInstance, pk=pk)
        error, event_type, payload_text = None, "", ""
        if request.method == "POST":
            event_type = request.POST.get("type", "").strip()
            payload_text = request.POST.get("payload", "").strip()
            try:
                payload = strict_json.loads(payload_text) if payload_text else None
                _policy(request, "events", instance)
                operations.event_send(
                    instance=instance, event_type=event_type, payload=payload, request=request
                )
            except strict_json.InvalidJson as exc:
                error = f"payload is not valid JSON ({exc.reason}): {exc.message}"
            except ApiError as exc:
                error = f"{exc.code}: {exc.message}"
            else:
                self.message_user(
                    request,
                    f"Sent 1 event {event_type!r} to {instance.instance_id}.",
                    messages.SUCCESS,
                )
                return self._back(instance)
        return TemplateResponse(
            request,
            "admin/workflows/send_event.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "title": f"Send event to {instance.instance_id}",
                "instance": instance,
                "error": error,
                "event_type": event_type,
                "payload_text": payload_text,
            },
        )


@admin.register(WorkflowDeployment)
class WorkflowOverviewAdmin(admin.ModelAdmin):
    """The "workflows" page: per workflow and version, instance counts by status and the
    active pointer, with activate (or roll back) buttons."""

    change_list_template = "admin/workflows/overview.html"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_urls(self):
        return [
            path(
                "activate/<str:name>/<int:version>/",
                self.admin_site.admin_view(self.activate_view),
                name="workflows_activate_version",
            ),
        ] + super().get_urls()

    def changelist_view(self, request, extra_context=None):
        statuses = list(STATUS_COLORS)
        counts = {}
        for row in (
            WorkflowInstance.objects.values("workflow_name", "version", "status")
            .annotate(n=Count("id"))
            .order_by()
        ):
            counts.setdefault((row["workflow_name"], row["version"]), {})[row["status"]] = row["n"]
        active = dict(WorkflowDeployment.objects.values_list("workflow_name", "active_version"))
        names = sorted(set(registry.names()) | {name for name, _ in counts} | set(active))
        workflows = []
        for name in names:
            versions = sorted(set(registry.versions(name)) | {v for n, v in counts if n == name})
            workflows.append(
                {
                    "name": name,
                    "active_version": active.get(name),
                    "versions": [
                        {
                            "version": v,
                            "registered": registry.get(name, v) is not None,
                            "is_active": active.get(name) == v,
                            "counts": [counts.get((name, v), {}).get(s, 0) for s in statuses],
                            "changelist": reverse("admin:workflows_workflowinstance_changelist")
                            + f"?workflow_name={name}&version={v}",
                        }
                        for v in versions
                    ],
                }
            )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Workflows",
            "statuses": statuses,
            "workflows": workflows,
            **(extra_context or {}),
        }
        return TemplateResponse(request, self.change_list_template, context)

    def activate_view(self, request, name: str, version: int):
        back = HttpResponseRedirect(reverse("admin:workflows_workflowdeployment_changelist"))
        if request.method != "POST" or request.POST.get("confirmed") != "yes":
            return TemplateResponse(
                request,
                "admin/workflows/confirm_action.html",
                {
                    **self.admin_site.each_context(request),
                    "opts": self.model._meta,
                    "title": f"Activate {name} v{version}?",
                    "action": "activate",
                    "workflow_name": name,
                    "version": version,
                    "instances": [],
                    "skipped": 0,
                },
            )
        try:
            policy_check(request, operation="manage", workflow_name=name)
            operations.version_activate(workflow_name=name, version=version, request=request)
            self.message_user(
                request, f"Activated {name} v{version}: new instances run it.", messages.SUCCESS
            )
        except ApiError as exc:
            self.message_user(
                request, f"Activate refused: {exc.code}: {exc.message}", messages.ERROR
            )
        return back
