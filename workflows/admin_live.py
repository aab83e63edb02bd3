"""The live parts of the instances console, mixed into WorkflowInstanceAdmin: the instance
page's waterfall and live-refresh box, the list's live-refresh box and its compact "started"
column, and the two JSON endpoints the pages poll (workflows.live computes what they say)."""

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html

from ops.console import live_context, staff_json
from workflows import live
from workflows.models import WorkflowInstance


class LiveInstanceAdmin:
    def get_urls(self):
        return [
            path("live.json", staff_json(self.list_live), name="workflows_instances_live"),
            path(
                "<int:pk>/live.json", staff_json(self.instance_live), name="workflows_instance_live"
            ),
            *super().get_urls(),
        ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        # Runs inside WorkflowInstanceAdmin.change_view's super() call: its context (the run
        # shown, the timeline entries) is in extra_context.
        extra_context = extra_context or {}
        instance = get_object_or_404(WorkflowInstance, pk=object_id)
        run = extra_context.get("run") or instance.run_number
        context = {
            "waterfall": live.instance_waterfall(instance=instance, run_number=run),
            "timeline_html": live.timeline_html(extra_context.get("timeline") or []),
            "live": live_context(
                url=reverse("admin:workflows_instance_live", args=[instance.pk]),
                state=live.instance_live(instance),
            ),
            **extra_context,
        }
        return super().change_view(request, object_id, form_url, context)

    def changelist_view(self, request, extra_context=None):
        url = reverse("admin:workflows_instances_live")
        context = {"live": live_context(url=url, state=live.instances_live())}
        return super().changelist_view(request, {**context, **(extra_context or {})})

    def list_live(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        return live.instances_live()

    def instance_live(self, request, pk: int):
        if not self.has_view_permission(request):
            raise PermissionDenied
        return live.instance_live(get_object_or_404(WorkflowInstance, pk=pk))

    @admin.display(description="started (UTC)", ordering="started_at")
    def started(self, obj):
        if obj.started_at is None:
            return "-"
        return format_html(
            '<time datetime="{}">{}</time>',
            obj.started_at.isoformat(),
            obj.started_at.strftime("%Y-%m-%d %H:%M:%S"),
        )
