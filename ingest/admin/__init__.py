"""The ingest console: raw events (with the DLQ as a triage filter), connections, traces and
imports. Lists are read-only; actions act only on rows whose state allows it, go through a
confirmation page, call the same services as the API, and say how many rows they touched.
Custom pages (drain, backfill, user overview and wipe) live in ingest.admin.pages."""

import json

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.timesince import timesince

from ingest.actions import SKIPPABLE_STATES, do_raw_events_mark_skipped, do_raw_events_replay
from ingest.admin import pages as admin_pages
from ingest.admin.filters import (
    EventTypeFilter,
    ProviderFilter,
    ReceivedFilter,
    TraceEventFilter,
    TriageFilter,
)
from ingest.admin.live import raw_events_live
from ingest.imports import import_job_refresh
from ingest.models import ImportJob, RawEvent, RawEventState, TerraConnection, TraceEvent
from ingest.selectors import raw_event_subject_id, trace_subject_id
from ops.console import (
    HealthDataAdmin,
    ReadOnlyAdmin,
    is_confirmed,
    live_context,
    staff_json,
    time_range_filter,
)

STATE_COLOURS = {
    RawEventState.PENDING: "#666",
    RawEventState.PROCESSED: "#2e7d32",
    RawEventState.SKIPPED: "#999",
    RawEventState.PARKED: "#b26a00",
    RawEventState.RETRYING: "#b26a00",
    RawEventState.DEAD: "#ba2121",
}


def user_overview_link(user) -> str:
    if user is None:
        return "—"
    url = reverse("admin:ingest_user_overview", args=[user.username])
    return format_html('<a href="{}">{}</a>', url, user.username)


class TraceInline(admin.TabularInline):
    """The row's journey, oldest first: a timeline on the raw event's page."""

    model = TraceEvent
    fields = ("created_at", "level", "event", "duration_ms", "data", "request_id")
    readonly_fields = fields
    ordering = ("created_at", "id")
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = True


@admin.register(RawEvent)
class RawEventAdmin(HealthDataAdmin):
    read_thing = "raw_event"  # its page shows the full payload
    list_display = (
        "id",
        "state_badge",
        "event_type",
        "provider",
        "user_link",
        "terra_user_id",
        "age",
        "error_short",
        "attempts",
    )
    list_display_links = ("id",)

    def get_queryset(self, request):
        # The change list shows 50 rows: never load their bodies (up to 50 MB each).
        return super().get_queryset(request).defer("body")

    list_filter = (
        TriageFilter,
        "state",
        ReceivedFilter,
        time_range_filter("received_at", "received (UTC)"),
        EventTypeFilter,
        ProviderFilter,
    )
    search_fields = ("=terra_user_id", "=reference_id", "=request_id")
    search_help_text = "exact Terra user id, reference id, request id or raw event id"
    list_select_related = ("user",)
    list_per_page = 50
    ordering = ("-received_at", "-id")
    actions = ["replay_selected", "mark_skipped"]
    inlines = [TraceInline]
    change_list_template = "admin/ingest/rawevent/change_list.html"
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "state_badge",
                    "event_type",
                    "provider",
                    "user_link",
                    "terra_user_id",
                    "reference_id",
                    "request_id",
                    "links",
                )
            },
        ),
        (
            "Processing",
            {
                "fields": (
                    "received_at",
                    "processed_at",
                    "attempts",
                    "next_attempt_at",
                    "process_error",
                    "traceback",
                    "signature_verified",
                    "dedup_key",
                )
            },
        ),
        ("Payload", {"fields": ("pretty_payload",)}),
    )
    # Every field is shown read-only: a raw event is evidence, not data to edit.
    readonly_fields = tuple(name for _, section in fieldsets for name in section["fields"])

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("drain/", view(admin_pages.drain_view), name="ingest_rawevent_drain"),
            path("live.json", staff_json(self.list_live), name="ingest_rawevents_live"),
            path(
                "bulk-replay/",
                view(admin_pages.bulk_replay_view),
                name="ingest_rawevent_bulk_replay",
            ),
            path(
                "<int:raw_event_id>/replay/",
                view(admin_pages.replay_one_view),
                name="ingest_rawevent_replay",
            ),
            *super().get_urls(),
        ]

    def changelist_view(self, request, extra_context=None):
        live = live_context(url=reverse("admin:ingest_rawevents_live"), state=raw_events_live())
        return super().changelist_view(request, {"live": live, **(extra_context or {})})

    def list_live(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        return raw_events_live()

    @admin.display(description="traceback")
    def traceback(self, obj):
        # The last raised error's frames (ops.tracebacks: no variable values), folded.
        if not obj.process_traceback:
            return "—"
        return format_html(
            '<details class="vf-traceback-box"><summary>last frames of the error</summary>'
            '<pre class="vf-traceback" style="white-space:pre-wrap">{}</pre></details>',
            obj.process_traceback,
        )

    def get_search_results(self, request, queryset, search_term):
        # Exact matches only: iexact (UPPER(col) = UPPER(x)) cannot use the indexes of a table
        # that grows by every delivery. A number also finds the row with that id.
        term = search_term.strip()
        if not term:
            return queryset, False
        match = Q(terra_user_id=term) | Q(reference_id=term) | Q(request_id=term)
        if term.isascii() and term.isdigit():
            match |= Q(pk=int(term))
        return queryset.filter(match), False

    def lookup_allowed(self, lookup, value, request=None):
        # Links from the user overview, connections and the dashboard filter on these.
        if lookup in ("user__username", "terra_user_id", "reference_id", "request_id"):
            return True
        return super().lookup_allowed(lookup, value, request)

    def read_subjects(self, obj):
        return raw_event_subject_id(obj)

    @admin.display(description="state", ordering="state")
    def state_badge(self, obj):
        return format_html(
            '<strong style="color:{}">{}</strong>', STATE_COLOURS.get(obj.state, "#000"), obj.state
        )

    @admin.display(description="user")
    def user_link(self, obj):
        return user_overview_link(obj.user)

    @admin.display(description="age", ordering="received_at")
    def age(self, obj):
        return timesince(obj.received_at).split(",")[0]

    @admin.display(description="error")
    def error_short(self, obj):
        if not obj.process_error:
            return ""
        text = obj.process_error
        return text if len(text) <= 80 else text[:79] + "…"

    @admin.display(description="links")
    def links(self, obj):
        traces = reverse("admin:ingest_traceevent_changelist") + f"?raw_event__id__exact={obj.pk}"
        by_request = ""
        if obj.request_id:
            by_request = format_html(
                ' · <a href="{}?request_id={}">all traces of request {}</a>',
                reverse("admin:ingest_traceevent_changelist"),
                obj.request_id,
                obj.request_id,
            )
        return format_html(
            '<a href="{}">traces of this event</a>{} · <a href="/v1/admin/raw-events/{}">JSON</a>',
            traces,
            by_request,
            obj.pk,
        )

    @admin.display(description="payload")
    def pretty_payload(self, obj):
        payload = obj.payload
        if payload is None:  # not a JSON object: show the bytes as text, as received
            text = bytes(obj.body).decode("utf-8", errors="replace")
        else:
            text = json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False)
        return format_html(
            '<pre style="max-height:40em;overflow:auto;white-space:pre-wrap">{}</pre>', text
        )

    @admin.action(description="Replay selected raw events…")
    def replay_selected(self, request, queryset):
        if is_confirmed(request):
            rows = list(queryset)
            count = do_raw_events_replay(ids=[r.pk for r in rows], request=request)
            self.report(request, f"Replayed {count} raw event(s).", objects=rows)
            return None
        return admin_pages.raw_events_confirmation(
            request,
            queryset,
            action="replay_selected",
            title="Replay raw events",
            explanation=admin_pages.REPLAY_EXPLANATION,
        )

    @admin.action(description="Mark selected as skipped (with a reason)…")
    def mark_skipped(self, request, queryset):
        eligible = queryset.filter(state__in=SKIPPABLE_STATES)
        form = admin_pages.SkipReasonForm(request.POST if is_confirmed(request) else None)
        if form.is_valid():
            rows = list(eligible)
            count = do_raw_events_mark_skipped(
                ids=[r.pk for r in rows], reason=form.cleaned_data["reason"], request=request
            )
            self.report(
                request,
                f"Marked {count} raw event(s) skipped ({queryset.count() - count} left alone: "
                "already finished).",
                objects=rows,
            )
            return None
        return admin_pages.raw_events_confirmation(
            request,
            eligible,
            action="mark_skipped",
            title="Mark raw events skipped",
            explanation=(
                "Unfinished rows (pending, parked, retrying, dead) are acknowledged without "
                "storing anything: state skipped, error skipped:manual:<reason>. Finished rows "
                "are left alone."
            ),
            form=form,
            ignored=queryset.count() - eligible.count(),
        )


@admin.register(TerraConnection)
class TerraConnectionAdmin(ReadOnlyAdmin):
    list_display = (
        "terra_user_id",
        "user_link",
        "provider",
        "active",
        "created_at",
        "last_webhook_at",
        "deactivated_at",
    )
    list_filter = ("provider", ("deactivated_at", admin.EmptyFieldListFilter))
    search_fields = ("=terra_user_id", "user__username", "=reference_id")
    list_select_related = ("user",)
    readonly_fields = (
        "user_link",
        "terra_user_id",
        "provider",
        "reference_id",
        "scopes",
        "created_at",
        "updated_at",
        "deactivated_at",
        "last_webhook_at",
        "actions_links",
    )
    fields = readonly_fields

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path(
                "<int:connection_id>/backfill/",
                view(admin_pages.backfill_view),
                name="ingest_terraconnection_backfill",
            ),
            path("users/", view(admin_pages.user_lookup_view), name="ingest_user_lookup"),
            path(
                "users/<str:username>/",
                view(admin_pages.user_overview_view),
                name="ingest_user_overview",
            ),
            path(
                "users/<str:username>/wipe/",
                view(admin_pages.user_wipe_view),
                name="ingest_user_wipe",
            ),
            *super().get_urls(),
        ]

    @admin.display(boolean=True, description="active")
    def active(self, obj):
        return obj.is_active

    @admin.display(description="user")
    def user_link(self, obj):
        return user_overview_link(obj.user)

    @admin.display(description="actions")
    def actions_links(self, obj):
        return format_html(
            '<a class="button" href="{}">Backfill N days…</a> '
            '<a href="{}?terra_user_id={}">raw events</a>',
            reverse("admin:ingest_terraconnection_backfill", args=[obj.pk]),
            reverse("admin:ingest_rawevent_changelist"),
            obj.terra_user_id,
        )


@admin.register(TraceEvent)
class TraceEventAdmin(HealthDataAdmin):
    read_thing = "trace_event"
    audit_list = True  # the list shows each row's data
    list_display = (
        "created_at",
        "level",
        "event",
        "raw_event_link",
        "user",
        "duration_ms",
        "request_id",
        "data",
    )
    list_filter = ("level", TraceEventFilter)
    search_fields = ("=request_id",)
    list_select_related = ("user", "raw_event")
    ordering = ("-created_at", "-id")
    readonly_fields = [f.name for f in TraceEvent._meta.fields]

    def get_queryset(self, request):
        # The raw event is joined for its link and its user: never load its body (up to 50 MB).
        return super().get_queryset(request).defer("raw_event__body")

    def read_subjects(self, obj):
        return trace_subject_id(obj)

    def lookup_allowed(self, lookup, value, request=None):
        # Links from a raw event and the dashboard filter on these.
        if lookup in ("raw_event__id__exact", "request_id", "user__username"):
            return True
        return super().lookup_allowed(lookup, value, request)

    @admin.display(description="raw event")
    def raw_event_link(self, obj):
        if obj.raw_event_id is None:
            return "—"
        return format_html(
            '<a href="{}">#{}</a>',
            reverse("admin:ingest_rawevent_change", args=[obj.raw_event_id]),
            obj.raw_event_id,
        )


@admin.register(ImportJob)
class ImportJobAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "user_link",
        "days",
        "start_date",
        "end_date",
        "requests",
        "chunks_received",
        "rows_normalized",
        "created_at",
    )
    search_fields = ("user__username",)
    list_select_related = ("user",)
    readonly_fields = [f.name for f in ImportJob._meta.fields]

    def get_object(self, request, object_id, from_field=None):
        # The counters are derived (ingest.imports): recount when someone looks at one job.
        job = super().get_object(request, object_id, from_field)
        return import_job_refresh(job=job) if job is not None else None

    @admin.display(description="user")
    def user_link(self, obj):
        return user_overview_link(obj.user)

    @admin.display(description="requests (failed)")
    def requests(self, obj):
        requested = obj.requested or []
        failed = sum(1 for r in requested if r.get("status") != "requested")
        return f"{len(requested)} ({failed})"
