"""Reads for ingest operations: the FilterSets and querysets that the operator API, the admin
console and the commands share, so "the DLQ" or "parked rows of bob" mean one query everywhere."""

from datetime import timedelta

import django_filters
from django.contrib.auth import get_user_model
from django.db.models import Count, Max, Q, QuerySet
from django.utils import timezone

from ingest.errors import InvalidFilter, RawEventNotFound, UserNotFound
from ingest.models import (
    ImportJob,
    RawEvent,
    RawEventState,
    TerraConnection,
    TraceEvent,
    TraceLevel,
)
from ingest.registry import user_tables
from ops.durations import parse_timedelta

DLQ_STATES = (RawEventState.PARKED, RawEventState.RETRYING, RawEventState.DEAD)
UNMAPPABLE_PREFIX = "skipped:unmappable:"
# Deliveries that had data but mapped to nothing: acknowledged, yet an operator must see them.
UNMAPPABLE = Q(state=RawEventState.SKIPPED, process_error__startswith=UNMAPPABLE_PREFIX)


def parse_age(raw: str) -> timedelta:
    """'90s', '15m', '2 hours', '7d' → timedelta, in the project's one duration grammar."""
    return parse_timedelta(raw)


class AgeFilter(django_filters.CharFilter):
    """older_than / newer_than on received_at, e.g. ?older_than=2h."""

    def __init__(self, *args, older: bool, **kwargs):
        self.older = older
        super().__init__(*args, **kwargs)

    def filter(self, qs, value):
        if not value:
            return qs
        try:
            cutoff = timezone.now() - parse_age(value)
        except ValueError as exc:
            raise InvalidFilter(str(exc)) from None
        lookup = "lte" if self.older else "gte"
        return qs.filter(**{f"{self.field_name}__{lookup}": cutoff})


class IdListFilter(django_filters.CharFilter):
    """?ids=1,2,3"""

    def filter(self, qs, value):
        if not value:
            return qs
        parts = [p.strip() for p in str(value).split(",") if p.strip()]
        if not all(p.isascii() and p.isdigit() for p in parts):
            raise InvalidFilter("ids must be integers.")
        return qs.filter(pk__in=[int(p) for p in parts])


class RawEventFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=RawEventState.choices)
    type = django_filters.CharFilter(field_name="event_type")
    provider = django_filters.CharFilter(field_name="provider", lookup_expr="iexact")
    error = django_filters.CharFilter(field_name="process_error", lookup_expr="icontains")
    terra_user_id = django_filters.CharFilter()
    reference_id = django_filters.CharFilter()
    request_id = django_filters.CharFilter()
    user = django_filters.CharFilter(field_name="user__username")
    older_than = AgeFilter(field_name="received_at", older=True)
    newer_than = AgeFilter(field_name="received_at", older=False)
    ids = IdListFilter()

    class Meta:
        model = RawEvent
        fields: list[str] = []


class TraceFilter(django_filters.FilterSet):
    request_id = django_filters.CharFilter()
    user = django_filters.CharFilter(field_name="user__username")
    level = django_filters.ChoiceFilter(choices=TraceLevel.choices)
    raw_event_id = django_filters.NumberFilter(field_name="raw_event_id")
    event = django_filters.CharFilter()

    class Meta:
        model = TraceEvent
        fields: list[str] = []


def _filtered(filterset_class, data, queryset) -> QuerySet:
    filterset = filterset_class(data=data or {}, queryset=queryset)
    if not filterset.is_valid():
        raise InvalidFilter(
            "The filters are not valid.",
            errors=filterset.errors,
        )
    return filterset.qs


def raw_events(*, filters: dict | None = None) -> QuerySet[RawEvent]:
    # Lists never need the bodies (up to 50 MB each); a detail view loads its one body.
    rows = RawEvent.objects.select_related("user").defer("body")
    return _filtered(RawEventFilter, filters, rows).order_by("-received_at", "-id")


def dlq_rows(*, filters: dict | None = None) -> QuerySet[RawEvent]:
    """Parked, retrying or dead rows, and skipped rows that mapped to nothing
    (`skipped:unmappable:<reason>`); never other skipped or done rows. Newest first."""
    return raw_events(filters=filters).filter(Q(state__in=DLQ_STATES) | UNMAPPABLE)


def raw_event_get(*, raw_event_id) -> RawEvent:
    row = RawEvent.objects.select_related("user").filter(pk=raw_event_id).first()
    if row is None:
        raise RawEventNotFound(f"No raw event {raw_event_id}.")
    return row


def traces(*, filters: dict | None = None) -> QuerySet[TraceEvent]:
    # The raw event is joined for its user: never its body (up to 50 MB).
    rows = TraceEvent.objects.select_related("user", "raw_event").defer("raw_event__body")
    return _filtered(TraceFilter, filters, rows).order_by("-created_at", "-id")


def trace_subject_id(row: TraceEvent) -> int | None:
    """The user a trace row concerns: its own, or its delivery's."""
    return row.user_id or (row.raw_event.user_id if row.raw_event_id else None)


def raw_event_subject_id(row: RawEvent) -> int | None:
    """The user a delivery concerns, also before the consumer resolved it: its connection's
    user, or the user its reference_id names."""
    if row.user_id is not None:
        return row.user_id
    if row.terra_user_id:
        found = TerraConnection.objects.filter(terra_user_id=row.terra_user_id)
        if user_id := found.values_list("user_id", flat=True).first():
            return user_id
    if row.reference_id:
        found = get_user_model().objects.filter(username=row.reference_id)
        return found.values_list("pk", flat=True).first()
    return None


def user_get(*, username: str):
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise UserNotFound(f"No user {username!r}.")
    return user


# Rounds of following re-authentications back (old_user ids of old_user ids): a chain longer
# than this is not a person's history.
REAUTH_ROUNDS = 5


def user_terra_user_ids(*, user) -> set[str]:
    """Every Terra user id `user` ever had: their connections', those named by deliveries
    resolved to them or carrying their username, and the ids their re-authentications retired
    (a user_reauth moves the connection to the new id; deliveries for the old one stay)."""
    ids = set(TerraConnection.objects.filter(user=user).values_list("terra_user_id", flat=True))
    ids |= set(
        RawEvent.objects.filter(Q(user=user) | Q(reference_id=user.get_username()))
        .exclude(terra_user_id="")
        .values_list("terra_user_id", flat=True)
        .distinct()
    )
    for _ in range(REAUTH_ROUNDS):
        reauths = RawEvent.objects.filter(event_type="user_reauth", terra_user_id__in=ids)
        retired = {_old_user_id(row) for row in reauths.only("id", "body").iterator()} - {""}
        if retired <= ids:
            break
        ids |= retired
    return ids


def _old_user_id(row: RawEvent) -> str:
    old = row.payload.get("old_user") if isinstance(row.payload, dict) else None
    value = old.get("user_id") if isinstance(old, dict) else None
    return value if isinstance(value, str) else ""


def user_raw_events(*, user, terra_user_ids=None, references=()) -> QuerySet[RawEvent]:
    """Every raw event that belongs to `user`: resolved to them, naming one of their Terra user
    ids (ever), or carrying their username or one of `references` (lab upload ids) as
    reference_id (before, or without, the consumer resolving it)."""
    if terra_user_ids is None:
        terra_user_ids = user_terra_user_ids(user=user)
    match = Q(user=user) | Q(reference_id__in=[user.get_username(), *references])
    if terra_user_ids:
        match |= Q(terra_user_id__in=sorted(terra_user_ids))
    return RawEvent.objects.filter(match)


def user_table_counts(*, user) -> dict[str, int]:
    return {t.key: t.model.objects.filter(user=user).count() for t in user_tables()}


def user_overview(*, user) -> dict:
    """What an operator asks first about a user: connections, rows, last event, stuck rows."""
    events = user_raw_events(user=user)
    stats = events.aggregate(
        last_received=Max("received_at"),
        parked=Count("id", filter=Q(state=RawEventState.PARKED)),
        dlq=Count("id", filter=Q(state__in=DLQ_STATES)),
        total=Count("id"),
    )
    return {
        "user": user,
        "connections": list(TerraConnection.objects.filter(user=user).order_by("-created_at")),
        "counts": user_table_counts(user=user),
        "raw_events": stats["total"],
        "last_event_received_at": stats["last_received"],
        "parked": stats["parked"],
        "dlq": stats["dlq"],
        "imports": list(ImportJob.objects.filter(user=user).order_by("-created_at")[:5]),
    }
