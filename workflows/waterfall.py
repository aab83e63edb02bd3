"""The instance page's waterfall: one run drawn as server-side SVG (no script, no CDN). Pure: it
takes plain step records and the retry history and returns bars, then markup; no database.

One row per step; on it one bar per attempt of a `do` step (failed attempts red, the backoff
before the next one hatched grey), sleeps and event waits as their own bars (dashed while still
pending), timeouts orange, and a "now" line with the current step's row marked while the run is
in flight. Every text goes through escape(): step names and errors are user data."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils.html import escape

LABEL_W, CHART_W, ROW_H, BAR_H, TOP, PAD = 220, 880, 18, 12, 30, 8
COLOURS = {
    "complete": "#16a34a",
    "failed": "#dc2626",
    "timeout": "#ea580c",
    "running": "#2563eb",
    "backoff": "#9ca3af",
    "sleep": "#7c3aed",
    "wait": "#0891b2",
    "group": "#6b7280",
    "cancelled": "#d1d5db",
}
PENDING = {"running", "retrying", "sleeping", "waiting", "looping"}  # a step still in progress
GROUP_TYPES = {"parallel", "race", "loop", "child"}


@dataclass(frozen=True)
class StepRecord:
    """What the waterfall needs of a workflow_step row (the model's fields of the same names)."""

    name: str
    type: str
    status: str
    attempts: int
    started_at: datetime
    completed_at: datetime | None = None
    next_retry_at: datetime | None = None
    wake_at: datetime | None = None
    error: dict | None = None


@dataclass(frozen=True)
class Retry:
    """One failed attempt that was retried: the engine's system log line says when it failed
    (the log's time) and when the next attempt may start."""

    attempt: int
    failed_at: datetime
    retry_at: datetime
    error_name: str = ""


@dataclass(frozen=True)
class Bar:
    row: int
    kind: str  # a COLOURS key
    start: datetime
    end: datetime
    label: str  # the hover text
    open_ended: bool = False  # still pending: drawn dashed up to where it is expected to end


@dataclass
class Waterfall:
    bars: list[Bar] = field(default_factory=list)
    rows: list[StepRecord] = field(default_factory=list)
    start: datetime | None = None
    end: datetime | None = None
    now: datetime | None = None
    current_row: int | None = None  # the step the run stands on, while in flight


TIMEOUT_ERRORS = ("StepTimeout", "WaitForEventTimeout")  # the engine's own (workflows.errors)


def is_timeout(error: dict | None) -> bool:
    return (error or {}).get("name") in TIMEOUT_ERRORS


def _ms(delta: timedelta) -> str:
    seconds = delta.total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 7200:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


def _error_text(error: dict | None) -> str:
    if not error:
        return ""
    return f"{error.get('name', 'Error')}: {str(error.get('message', ''))[:200]}"


def _do_bars(i: int, step: StepRecord, retries: list[Retry], now: datetime) -> list[Bar]:
    bars, start = [], step.started_at
    for retry in sorted(retries, key=lambda r: r.attempt):
        if retry.attempt >= step.attempts and step.status != "retrying":
            break  # a history longer than the row (a restart from a step): trust the row
        timed_out = retry.error_name in TIMEOUT_ERRORS
        what = "timed out" if timed_out else f"failed ({retry.error_name or 'error'})"
        bars.append(
            Bar(
                i,
                "timeout" if timed_out else "failed",
                start,
                retry.failed_at,
                f"{step.name} attempt {retry.attempt} {what}",
            )
        )
        pending = retry.retry_at > now
        bars.append(
            Bar(
                i,
                "backoff",
                retry.failed_at,
                retry.retry_at,
                f"{step.name} backoff before attempt {retry.attempt + 1}"
                + (" (pending)" if pending else ""),
                open_ended=pending,
            )
        )
        start = retry.retry_at
    if step.status == "retrying":
        return bars  # the next attempt has not started: the last bar is its backoff
    tries = f"attempt {step.attempts}" + (
        f" of {step.attempts}" if step.attempts > 1 and not retries else ""
    )
    if step.status == "running":
        bars.append(Bar(i, "running", start, max(now, start), f"{step.name} {tries} running", True))
    elif step.status == "complete":
        bars.append(
            Bar(i, "complete", start, step.completed_at or start, f"{step.name} {tries} ok")
        )
    elif step.status == "cancelled":
        bars.append(
            Bar(i, "cancelled", start, step.completed_at or start, f"{step.name} cancelled")
        )
    else:
        kind = "timeout" if is_timeout(step.error) else "failed"
        text = f"{step.name} {tries} {'timed out' if kind == 'timeout' else 'failed'}"
        bars.append(
            Bar(i, kind, start, step.completed_at or start, f"{text}: {_error_text(step.error)}")
        )
    return bars


def _wait_bar(i: int, step: StepRecord, now: datetime) -> Bar:
    kind = "sleep" if step.type == "sleep" else "wait"
    what = "sleep" if kind == "sleep" else "wait for event"
    if step.status in PENDING:
        end = step.wake_at or now
        return Bar(
            i,
            kind,
            step.started_at,
            max(end, step.started_at),
            f"{step.name}: {what} until {end.isoformat()}",
            True,
        )
    if step.status == "timed_out":
        return Bar(
            i,
            "timeout",
            step.started_at,
            step.completed_at or step.wake_at or step.started_at,
            f"{step.name}: {what} timed out",
        )
    end = step.completed_at or step.wake_at or step.started_at
    return Bar(
        i,
        kind if step.status != "cancelled" else "cancelled",
        step.started_at,
        end,
        f"{step.name}: {what} {step.status}",
    )


def build(
    steps: list[StepRecord], retries: dict[str, list[Retry]], *, now: datetime, in_flight: bool
) -> Waterfall:
    """Bars of one run's steps (in the order given: by start), the time axis, and the current
    step (the last one still in progress, else the last one) when the run is in flight."""
    chart = Waterfall(rows=list(steps), now=now)
    for i, step in enumerate(steps):
        if step.type == "do":
            chart.bars.extend(_do_bars(i, step, retries.get(step.name, []), now))
        elif step.type in ("sleep", "wait_for_event"):
            chart.bars.append(_wait_bar(i, step, now))
        else:
            end = step.completed_at or now
            chart.bars.append(
                Bar(
                    i,
                    "group",
                    step.started_at,
                    max(end, step.started_at),
                    f"{step.name}: {step.type} {step.status}",
                    step.completed_at is None,
                )
            )
        if in_flight and step.status in PENDING:
            chart.current_row = i
    if in_flight and chart.current_row is None and steps:
        chart.current_row = len(steps) - 1
    if chart.bars:
        chart.start = min(b.start for b in chart.bars)
        chart.end = max([b.end for b in chart.bars] + ([now] if in_flight else []))
        # A run that took no measurable time still gets an axis (a second long).
        chart.end = max(chart.end, chart.start + timedelta(seconds=1))
    return chart


def _x(chart: Waterfall, at: datetime) -> float:
    span = (chart.end - chart.start).total_seconds() or 1.0
    return LABEL_W + CHART_W * (at - chart.start).total_seconds() / span


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def svg(chart: Waterfall, *, anchor: str = "step-") -> str:
    """The drawing; each row links to `#<anchor><row>` (the step's details on the page)."""
    if not chart.bars:
        return '<svg xmlns="http://www.w3.org/2000/svg" class="vf-waterfall" width="600" height="30"><text x="8" y="20">No steps in this run yet.</text></svg>'
    width = LABEL_W + CHART_W + PAD * 2
    height = TOP + len(chart.rows) * ROW_H + PAD
    out = [
        # Scales down to the page's width (no sideways scrolling at 1400 px), never up.
        f'<svg xmlns="http://www.w3.org/2000/svg" class="vf-waterfall" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" '
        f'font-size="11" style="width:100%;max-width:{width}px;height:auto">',
        '<defs><pattern id="vf-hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="3" height="6" fill="#9ca3af"/></pattern></defs>',
    ]
    span = chart.end - chart.start
    for k in range(6):  # the time axis: offsets from the run's first step
        x = LABEL_W + CHART_W * k / 5
        out.append(
            f'<line x1="{x:.1f}" y1="{TOP - 6}" x2="{x:.1f}" y2="{height - PAD}" stroke="#e5e7eb"/>'
        )
        out.append(
            f'<text x="{x:.1f}" y="{TOP - 10}" text-anchor="middle" fill="#4b5563">+{_ms(span * k / 5) if k else "0"}</text>'
        )
    if chart.current_row is not None:
        y = TOP + chart.current_row * ROW_H
        out.append(
            f'<rect class="vf-current" x="0" y="{y}" width="{width}" height="{ROW_H}" fill="#fef3c7"/>'
        )
    for i, step in enumerate(chart.rows):
        y = TOP + i * ROW_H
        out.append(
            f'<a href="#{anchor}{i}"><text x="4" y="{y + 13}" fill="#111827">{escape(_cut(step.name, 34))}</text></a>'
        )
    for bar in chart.bars:
        x1, x2 = _x(chart, bar.start), _x(chart, bar.end)
        y = TOP + bar.row * ROW_H + (ROW_H - BAR_H) / 2
        fill = "url(#vf-hatch)" if bar.kind == "backoff" else COLOURS[bar.kind]
        dashed = ' fill-opacity="0.35" stroke-dasharray="3 2"' if bar.open_ended else ""
        out.append(
            f'<rect class="vf-bar vf-{bar.kind}" x="{x1:.1f}" y="{y:.1f}" width="{max(x2 - x1, 2):.1f}" '
            f'height="{BAR_H}" rx="2" fill="{fill}" stroke="{COLOURS[bar.kind]}"{dashed}>'
            f"<title>{escape(bar.label)} — {_ms(bar.end - bar.start)}, from {bar.start.isoformat()}</title></rect>"
        )
    if chart.current_row is not None and chart.start <= chart.now <= chart.end:
        x = _x(chart, chart.now)
        out.append(
            f'<line class="vf-now" x1="{x:.1f}" y1="{TOP - 6}" x2="{x:.1f}" y2="{height - PAD}" stroke="#b91c1c" stroke-width="1.5"><title>now</title></line>'
        )
    out.append("</svg>")
    return "".join(out)
