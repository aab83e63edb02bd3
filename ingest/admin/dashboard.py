"""The admin index dashboard: raw events by state (24 h), DLQ size, events per hour as a
server-drawn SVG (no CDN, no JavaScript), and when the drain and the reconcile last ran."""

from datetime import timedelta

from django.db.models import Count
from django.db.models.functions import TruncHour
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from ingest.models import RawEvent, RawEventState, TraceEvent
from ingest.selectors import DLQ_STATES
from ingest.tasks import DRAIN, RECONCILE

CHART_W, CHART_H, PAD = 720, 160, 24


def hourly_counts(*, now=None, hours: int = 24) -> list[tuple[object, int]]:
    """[(hour start, count)] for the last `hours` whole hours including the current one."""
    now = now or timezone.now()
    current = now.replace(minute=0, second=0, microsecond=0)
    first = current - timedelta(hours=hours - 1)
    rows = (
        RawEvent.objects.filter(received_at__gte=first)
        .annotate(hour=TruncHour("received_at"))
        .values("hour")
        .annotate(n=Count("id"))
    )
    found = {row["hour"].replace(tzinfo=None): row["n"] for row in rows if row["hour"]}
    buckets = [first + timedelta(hours=i) for i in range(hours)]
    return [(b, found.get(b.replace(tzinfo=None), 0)) for b in buckets]


def hourly_chart_svg(series: list[tuple[object, int]]) -> SafeString:
    """Bar chart as inline SVG; every value is a number we computed, so markup stays safe."""
    peak = max((n for _, n in series), default=0) or 1
    inner_w, inner_h = CHART_W - 2 * PAD, CHART_H - 2 * PAD
    slot = inner_w / max(len(series), 1)
    bars = []
    for i, (hour, n) in enumerate(series):
        h = inner_h * n / peak
        x, y = PAD + i * slot + 1, PAD + inner_h - h
        # format_html escapes its arguments into strings, so numbers are formatted first.
        bars.append(
            format_html(
                '<rect x="{}" y="{}" width="{}" height="{}" fill="#417690">'
                "<title>{}:00 UTC — {} events</title></rect>",
                f"{x:.1f}",
                f"{y:.1f}",
                f"{max(slot - 2, 1):.1f}",
                f"{h:.1f}",
                f"{hour:%H}",
                n,
            )
        )
        if i % 6 == 0:
            bars.append(
                format_html(
                    '<text x="{}" y="{}" font-size="10" fill="#666">{}:00</text>',
                    f"{x:.1f}",
                    CHART_H - 6,
                    f"{hour:%H}",
                )
            )
    axis = format_html(
        '<text x="{}" y="{}" font-size="10" fill="#666">max {}/h</text>'
        '<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#ccc"/>',
        PAD,
        PAD - 8,
        peak if any(n for _, n in series) else 0,
        PAD,
        PAD + inner_h,
        PAD + inner_w,
        PAD + inner_h,
    )
    return format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {}" width="100%" '
        'role="img" aria-label="raw events per hour, last 24 hours">{}{}</svg>',
        CHART_W,
        CHART_H,
        axis,
        mark_safe("".join(bars)),  # each bar built by format_html above
    )


def _last_trace(event: str):
    return TraceEvent.objects.filter(event=event).order_by("-created_at").first()


def _last_task(group: str):
    """django-q2's record of the last scheduled run (success or failure), if it kept one."""
    from django_q.models import Task

    return (
        Task.objects.filter(group=group)
        .only("name", "started", "stopped", "success", "result")
        .order_by("-stopped")
        .first()
    )


def dashboard_context(*, now=None) -> dict:
    now = now or timezone.now()
    by_state = dict(
        RawEvent.objects.filter(received_at__gte=now - timedelta(hours=24))
        .values_list("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )
    states = [(state.value, by_state.get(state.value, 0)) for state in RawEventState]
    series = hourly_counts(now=now)
    runs = []
    for label, event, group in (
        ("drain", "drain_run", DRAIN),
        ("reconcile", "reconcile_run", RECONCILE),
    ):
        runs.append({"label": label, "trace": _last_trace(event), "task": _last_task(group)})
    # All ages: a dead row from last week is still waiting for someone.
    dlq = dict(
        RawEvent.objects.filter(state__in=DLQ_STATES)
        .values_list("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )
    # raw_events_unfinished (state, received_at) answers this from the index's first entry.
    oldest_pending = (
        RawEvent.objects.filter(state=RawEventState.PENDING)
        .order_by("received_at")
        .values_list("received_at", flat=True)
        .first()
    )
    return {
        "oldest_pending_age": (now - oldest_pending) if oldest_pending else None,
        "states_24h": states,
        "total_24h": sum(n for _, n in states),
        "dlq_size": sum(dlq.values()),
        "dlq_by_state": [(s.value, dlq.get(s.value, 0)) for s in DLQ_STATES],
        "chart": hourly_chart_svg(series),
        "events_last_hour": series[-1][1] if series else 0,
        "runs": runs,
        "now": now,
    }
