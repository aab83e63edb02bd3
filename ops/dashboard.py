"""The ops panel of the console's front page: which worker processes are alive (by heartbeat)
and when each last finished work, a red banner when no consumer or no workflow runner is or one
is stuck (beats, finishes nothing, work waits), and the django-q2 schedules that are overdue
(not run for twice their period: the cluster that should run them is down or stuck)."""

from datetime import timedelta

from django.utils import timezone

from ops import liveness

# What each kind does, and which kinds do it: a qcluster also runs workflows (wake tasks and
# the sweep schedule), so a live cluster alone keeps workflows moving.
BANNERS = (
    ("No live consumer", (liveness.CLUSTER,), "no qcluster has beaten lately"),
    (
        "No live workflow runner",
        (liveness.CLUSTER, liveness.RUNNER),
        "neither a qcluster nor a runworkflows process has beaten lately",
    ),
)
STUCK_TITLES = {liveness.CLUSTER: "Stuck consumer", liveness.RUNNER: "Stuck workflow runner"}
KIND_LABELS = {
    liveness.CLUSTER: "qcluster (consumer, schedules, workflow wake tasks)",
    liveness.RUNNER: "runworkflows (workflow runner)",
}
_PERIODS = {
    "H": timedelta(hours=1),
    "D": timedelta(days=1),
    "W": timedelta(weeks=1),
    "BW": timedelta(weeks=2),
    "M": timedelta(days=31),
    "BM": timedelta(days=62),
    "Q": timedelta(days=92),
    "Y": timedelta(days=366),
}


def schedule_period(schedule) -> timedelta | None:
    """How often a django-q2 schedule runs; None for one-off schedules."""
    if schedule.schedule_type == "I":
        return timedelta(minutes=schedule.minutes or 1)
    if schedule.schedule_type == "C" and schedule.cron:
        from cronsim import CronSim, CronSimError

        try:
            fires = CronSim(schedule.cron, schedule.next_run or timezone.now())
            first = next(fires)
            return next(fires) - first
        except (CronSimError, StopIteration):
            return timedelta(days=1)
    return _PERIODS.get(schedule.schedule_type)


def human_duration(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds} s"


def schedules_overdue(*, now=None) -> list[dict]:
    """Repeating schedules whose next run is more than one period late, i.e. whose last run is
    more than two periods old. django-q2 moves next_run when a cluster picks the schedule up,
    so with no cluster running next_run stays in the past."""
    from django_q.models import Schedule

    now = now or timezone.now()
    overdue = []
    for schedule in Schedule.objects.exclude(repeats=0).exclude(schedule_type="O"):
        period = schedule_period(schedule)
        if period is None or schedule.next_run is None:
            continue
        late = now - schedule.next_run
        if late > period:
            overdue.append(
                {
                    "name": schedule.name or schedule.func,
                    "period": human_duration(period),
                    "last_run_age": human_duration(late + period),
                    "next_run": schedule.next_run,
                }
            )
    return overdue


def ops_dashboard_context() -> dict:
    workers = liveness.workers_live()
    live = liveness.live_count_by_kind(workers)
    banners = [
        {"title": title, "why": why}
        for title, kinds, why in BANNERS
        if not any(live.get(kind) for kind in kinds)
    ]
    for w in workers:
        if w["stuck"]:
            w["stuck_for"] = human_duration(timedelta(seconds=w["stuck_seconds"]))
            banners.append(
                {
                    "title": STUCK_TITLES.get(w["kind"], f"Stuck {w['kind']}"),
                    "why": f"{w['host']} pid {w['pid']} beats but has finished nothing for "
                    f"{w['stuck_for']} while work waits",
                }
            )
    for w in workers:
        if w["progress_age_seconds"] is not None:
            w["progress_ago"] = human_duration(timedelta(seconds=w["progress_age_seconds"]))
    by_kind = [
        {
            "kind": kind,
            "label": KIND_LABELS[kind],
            "live": live.get(kind, 0),
            "workers": [w for w in workers if w["kind"] == kind],
        }
        for kind in liveness.KINDS
    ]
    return {
        "banners": banners,
        "by_kind": by_kind,
        "beat_seconds": liveness.heartbeat_seconds(),
        "stale_after_seconds": liveness.stale_after().total_seconds(),
        "stuck_after": human_duration(liveness.stuck_after()),
        "overdue": schedules_overdue(),
    }
