"""What the console's instance page and its live refresh read: the run's waterfall (from the
step rows and the engine's retry log lines) with each step's details, and the small JSON
"stamp" the page's script polls to know that something changed and whether anything is in
flight (the script stops polling once nothing is)."""

import html
import json
from datetime import UTC, datetime

from django.db.models import Count, Max
from django.utils.safestring import mark_safe

from workflows import runtime, selectors, waterfall
from workflows.http.timeline import duration_text
from workflows.models import TERMINAL_STATUSES, Status, WorkflowInstance, WorkflowLog, WorkflowTask

STEP_LIMIT = 2000  # rows drawn and detailed: a page that renders, even for a run of a loop
IN_FLIGHT = (Status.ACTIVE, Status.WAITING)  # statuses a runner moves on its own


def _pretty(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


def retries_of(*, instance: WorkflowInstance, run_number: int) -> dict[str, list]:
    """{step name: [Retry]} from the engine's "attempt N failed … retry at" system lines, which
    carry {"step", "attempt", "retry_at"} as data (older lines without it are left out)."""
    out: dict[str, list] = {}
    rows = WorkflowLog.objects.filter(
        instance=instance, run_number=run_number, category="system", level="warn"
    ).values_list("data", "created_at")
    for data, created_at in rows:
        if not isinstance(data, dict) or "retry_at" not in data:
            continue
        try:
            retry_at = datetime.fromisoformat(data["retry_at"])
            attempt = int(data["attempt"])
        except (TypeError, ValueError, KeyError):
            continue
        out.setdefault(str(data.get("step", "")), []).append(
            waterfall.Retry(
                attempt=attempt,
                failed_at=created_at,
                retry_at=retry_at,
                error_name=str(data.get("error", "")),
            )
        )
    return out


def step_details(step) -> dict:
    """One step as the page's expandable row shows it: output and error as formatted JSON, the
    bounded traceback apart so it reads as a traceback."""
    error = dict(step.error) if isinstance(step.error, dict) else step.error
    trace = error.pop("traceback", None) if isinstance(error, dict) else None
    return {
        "name": step.name,
        "type": step.type,
        "status": step.status,
        "attempts": step.attempts,
        "started_at": step.started_at,
        "completed_at": step.completed_at,
        "next_retry_at": step.next_retry_at,
        "wake_at": step.wake_at,
        "wait_event_type": step.wait_event_type,
        "duration": _duration(step),
        "result_json": None if step.result is None else _pretty(step.result),
        "error_json": None if error is None else _pretty(error),
        "traceback": trace,
        "failed": step.status in ("errored", "timed_out", "retrying"),
    }


def _duration(step) -> str:
    return duration_text(step.started_at, step.completed_at)


def instance_waterfall(*, instance: WorkflowInstance, run_number: int) -> dict:
    """{"svg", "steps", "bars", "truncated"} of one run for the instance page."""
    now = runtime.now()
    rows = list(
        selectors.instance_steps(instance=instance, run_number=run_number)[: STEP_LIMIT + 1]
    )
    truncated = len(rows) > STEP_LIMIT
    rows = sorted(rows[:STEP_LIMIT], key=lambda s: (s.started_at, s.pk))
    records = [
        waterfall.StepRecord(
            name=s.name,
            type=s.type,
            status=s.status,
            attempts=s.attempts,
            started_at=s.started_at,
            completed_at=s.completed_at,
            next_retry_at=s.next_retry_at,
            wake_at=s.wake_at,
            error=s.error if isinstance(s.error, dict) else None,
        )
        for s in rows
    ]
    in_flight = run_number == instance.run_number and instance.status in IN_FLIGHT
    chart = waterfall.build(
        records, retries_of(instance=instance, run_number=run_number), now=now, in_flight=in_flight
    )
    steps = [step_details(s) for s in rows]
    return {
        "svg": mark_safe(waterfall.svg(chart)),  # noqa: S308 - waterfall escapes every text
        "steps_html": steps_html(steps, current_row=chart.current_row),
        "count": len(steps),
        "bars": len(chart.bars),
        "current_row": chart.current_row,
        "truncated": truncated,
    }


def instance_live(instance: WorkflowInstance) -> dict:
    """The instance page's poll: its status and a stamp that changes whenever a step, an event
    or a log line is written, or the instance's own row is (status, run, output)."""
    steps = instance.steps.filter(run_number=instance.run_number).aggregate(
        n=Count("id"), last=Max("id"), done=Max("completed_at")
    )
    logs = instance.logs.filter(run_number=instance.run_number).aggregate(last=Max("id"))
    events = instance.events.aggregate(last=Max("id"))
    stamp = [
        instance.status,
        instance.run_number,
        instance.updated_at.isoformat(),
        steps["n"],
        steps["last"],
        steps["done"].isoformat() if steps["done"] else None,
        logs["last"],
        events["last"],
    ]
    return {
        "id": instance.instance_id,
        "workflow": instance.workflow_name,
        "status": instance.status,
        "run_number": instance.run_number,
        "steps": steps["n"],
        "in_flight": instance.status in IN_FLIGHT,
        "finished": instance.status in TERMINAL_STATUSES,
        "stamp": json.dumps(stamp, default=str),
    }


def instances_live() -> dict:
    """The instances list's poll. Open instances (active, waiting, paused) are exactly those
    with a task row, a small table: counted and their last update taken through it; a new
    instance moves the newest id. Never a scan of the finished instances."""
    open_work = WorkflowTask.objects.aggregate(
        n=Count("id", distinct=True),
        last=Max("instance__updated_at"),
        step=Max("instance__steps__id"),
        step_done=Max("instance__steps__completed_at"),
    )
    in_flight = WorkflowTask.objects.filter(instance__status__in=IN_FLIGHT).exists()
    newest = WorkflowInstance.objects.aggregate(last=Max("id"))["last"]
    return {
        "open": open_work["n"],
        "in_flight": in_flight,
        "stamp": json.dumps([newest, *open_work.values()], default=str),
    }


# -- the instance page's long lists, rendered here: a template loop over 1,000 steps and their
# timeline costs most of the page's time (bench/console.py); f-strings over escaped text do not.
# Every value goes through _e (html.escape: &, <, >, " and ').


def _e(value) -> str:
    return html.escape(str(value))


def _utc(value, *, ms: bool = True) -> str:
    if value is None:
        return "-"
    text = value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return f'<time datetime="{value.isoformat()}">{text[:-3] if ms else text[:-7]} UTC</time>'


def _step_html(i: int, s: dict, current: bool) -> str:
    summary = f"<b>{_e(s['name'])}</b> · {_e(s['type'])} · "
    summary += f'<span class="vf-step-status">{_e(s["status"])}</span>'
    if s["attempts"] > 1:
        summary += f" · {s['attempts']} attempts"
    summary += f" · started {_utc(s['started_at'])}"
    if s["completed_at"]:
        summary += f" · took {_e(s['duration'])}"
    if s["next_retry_at"]:
        summary += f" · next attempt {_utc(s['next_retry_at'])}"
    if s["wake_at"]:
        summary += f" · until {_utc(s['wake_at'], ms=False)}"
    body = ""
    if s["wait_event_type"]:
        body += f"<p>waits for event <code>{_e(s['wait_event_type'])}</code></p>"
    if s["result_json"]:
        body += f'<p><b>Output</b></p><pre class="vf-json">{_e(s["result_json"])}</pre>'
    if s["error_json"]:
        body += f'<p><b>Error</b></p><pre class="vf-json vf-error">{_e(s["error_json"])}</pre>'
    if s["traceback"]:
        body += "<p><b>Traceback</b> (last frames, no variable values)</p>"
        body += f'<pre class="vf-traceback">{_e(s["traceback"])}</pre>'
    if not s["result_json"] and not s["error_json"]:
        body += "<p><em>No output yet.</em></p>"
    classes = "vf-step vf-step-failed" if s["failed"] else "vf-step"
    marker = ' data-current="1"' if current else ""
    return (
        f'<details id="step-{i}" class="{classes}"{marker}><summary>{summary}</summary>'
        f'<div style="padding:4px 16px">{body}</div></details>'
    )


def steps_html(steps: list[dict], *, current_row: int | None) -> str:
    """The expandable step rows under the waterfall (ids step-<row>, which its bars link to)."""
    rows = (_step_html(i, s, i == current_row) for i, s in enumerate(steps))
    return mark_safe("".join(rows))  # noqa: S308 - every value escaped by _e


def timeline_html(entries: list[dict]) -> str:
    """The timeline table's rows (workflows.http.timeline entries)."""
    rows = []
    for e in entries:
        replay = e.get("is_replay")
        dim = ' style="opacity:.6"' if replay else ""
        mark = " <em>(replay)</em>" if replay else ""
        detail = f'<pre style="margin:0">{_e(e["detail"])}</pre>' if e.get("detail") else ""
        rows.append(
            f"<tr{dim}><td>{_utc(e['at'])}</td><td>{_e(e['kind'])}</td>"
            f"<td>{_e(e['title'])}{mark}</td><td>{_e(e['status'])}</td>"
            f"<td>{_e(e.get('duration') or '')}</td><td>{detail}</td></tr>"
        )
    if not rows:
        return mark_safe('<tr><td colspan="6">Nothing recorded in this run yet.</td></tr>')
    return mark_safe("".join(rows))  # noqa: S308 - every value escaped by _e
