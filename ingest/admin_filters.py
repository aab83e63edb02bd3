"""List filters of the ingest console that match how incidents are triaged: the DLQ and other
unfinished sets, and the age of a delivery."""

from datetime import timedelta

from django.contrib import admin
from django.utils import timezone

from ingest.models import RawEventState
from ingest.selectors import DLQ_STATES, NO_CONNECTION_ERROR, parse_age


class TriageFilter(admin.SimpleListFilter):
    title = "triage"
    parameter_name = "triage"

    def lookups(self, request, model_admin):
        return [
            ("dlq", "DLQ (parked, retrying, dead)"),
            ("unfinished", "Unfinished (pending too)"),
            ("no_connection", "Parked: no connection for Terra user"),
        ]

    def queryset(self, request, queryset):
        if self.value() == "dlq":
            return queryset.filter(state__in=DLQ_STATES)
        if self.value() == "unfinished":
            return queryset.filter(state__in=(RawEventState.PENDING, *DLQ_STATES))
        if self.value() == "no_connection":
            return queryset.filter(state=RawEventState.PARKED, process_error=NO_CONNECTION_ERROR)
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
