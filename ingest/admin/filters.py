"""List filters of the ingest console that match how incidents are triaged: the DLQ and other
unfinished sets, and the age of a delivery."""

from datetime import timedelta

from django.contrib import admin
from django.utils import timezone

from ingest.decisions import NO_CONNECTION
from ingest.models import RawEventState, TerraConnection
from ingest.registry import registered_types
from ingest.selectors import DLQ_STATES, UNMAPPABLE, parse_age


class TriageFilter(admin.SimpleListFilter):
    title = "triage"
    parameter_name = "triage"

    def lookups(self, request, model_admin):
        return [
            ("dlq", "DLQ (parked, retrying, dead)"),
            ("unfinished", "Unfinished (pending too)"),
            ("no_connection", "Parked: no connection for Terra user"),
            ("unmappable", "Skipped: unmappable (data that mapped to nothing)"),
        ]

    def queryset(self, request, queryset):
        if self.value() == "dlq":
            return queryset.filter(state__in=DLQ_STATES)
        if self.value() == "unfinished":
            return queryset.filter(state__in=(RawEventState.PENDING, *DLQ_STATES))
        if self.value() == "no_connection":
            return queryset.filter(state=RawEventState.PARKED, process_error=NO_CONNECTION)
        if self.value() == "unmappable":
            return queryset.filter(UNMAPPABLE)
        return queryset


class ReceivedFilter(admin.SimpleListFilter):
    title = "received"
    parameter_name = "received"

    def lookups(self, request, model_admin):
        return [
            ("1h", "last hour"),
            ("24h", "last 24 h"),
            ("7d", "last 7 days"),
            ("old", "older than 24 h"),
        ]

    def queryset(self, request, queryset):
        value = self.value()
        if value == "old":
            return queryset.filter(received_at__lt=timezone.now() - timedelta(hours=24))
        if value:
            try:
                return queryset.filter(received_at__gte=timezone.now() - parse_age(value))
            except ValueError:
                return queryset
        return queryset


class EventTypeFilter(admin.SimpleListFilter):
    """Choices from the normalizer registry, not SELECT DISTINCT over every delivery ever."""

    title = "type"
    parameter_name = "event_type"

    def lookups(self, request, model_admin):
        known = set(registered_types()) | {"auth", "deauth", "athlete", "nutrition"}
        return [(t, t) for t in sorted(known)]

    def queryset(self, request, queryset):
        return queryset.filter(event_type=self.value()) if self.value() else queryset


class ProviderFilter(admin.SimpleListFilter):
    """Providers we hold connections for (a small table), matched case-insensitively."""

    title = "provider"
    parameter_name = "provider"

    def lookups(self, request, model_admin):
        providers = TerraConnection.objects.values_list("provider", flat=True).distinct()
        return [(p.upper(), p.upper()) for p in sorted({p.upper() for p in providers if p})]

    def queryset(self, request, queryset):
        if not self.value():
            return queryset
        return queryset.filter(provider__in={self.value(), self.value().lower()})


class TraceEventFilter(admin.SimpleListFilter):
    """The events the webhook, the consumer and the schedules write (a fixed list, so the page
    does not scan the traces table for distinct values)."""

    title = "event"
    parameter_name = "event"
    EVENTS = (
        "webhook_received",
        "queue_published",
        "queue_publish_failed",
        "normalized",
        "parked",
        "skipped",
        "retry_scheduled",
        "dead",
        "backfill_requested",
        "backfill_failed",
        "connections_reconciled",
        "drain_run",
        "reconcile_run",
    )

    def lookups(self, request, model_admin):
        return [(e, e) for e in self.EVENTS]

    def queryset(self, request, queryset):
        return queryset.filter(event=self.value()) if self.value() else queryset
