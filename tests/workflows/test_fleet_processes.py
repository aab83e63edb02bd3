"""Concurrency caps with real processes on PostgreSQL: 4 `runworkflows` processes (2 threads
each) and HTTP ticks racing over capped workflows. Each step callback writes start/end lines
(monotonic clock, shared by all processes) to a trace file; the test counts how many callbacks
overlapped."""

import threading

import httpx
import pytest

from ops.services import api_key_create
from tests.ops.test_idempotency import roomy_live_server  # noqa: F401 - fixture
from tests.workflows.test_http_support import TICK
from tests.workflows.test_runner_processes import MODULES, runners, wait_for  # noqa: F401
from workflows import services
from workflows.models import WorkflowInstance

pytestmark = [pytest.mark.postgres_only, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
FLEET_MODULES = MODULES + ",tests.workflows.fleet_workflows"


def max_overlap(lines: list[list[str]], key=lambda instance_id: "all") -> dict[str, int]:
    """Per key: the most callbacks that were between their start and end at one moment."""
    events = sorted(
        (int(ns), 1 if kind == "start" else -1, key(inst)) for inst, kind, ns, _pid in lines
    )
    running: dict[str, int] = {}
    peak: dict[str, int] = {}
    for _ns, delta, group in events:
        running[group] = running.get(group, 0) + delta
        peak[group] = max(peak.get(group, 0), running[group])
    return peak


def race(runners, live_server, trace, stop_when):  # noqa: F811
    """4 runner processes plus a thread calling the HTTP tick until `stop_when()`."""
    procs = [runners.start(concurrency=2, modules=FLEET_MODULES) for _ in range(4)]
    _, raw = api_key_create(name="ticker", scopes=[TICK])
    done = threading.Event()

    def ticker():
        with httpx.Client(base_url=live_server, timeout=60) as client:
            while not done.is_set():
                client.post(
                    "/v1/workflows/_runner/tick",
                    json={"max_instances": 3},
                    headers={"X-Admin-Key": raw},
                )

    thread = threading.Thread(target=ticker, daemon=True)
    thread.start()
    try:
        wait_for(stop_when, timeout=120, what="every instance to complete")
    finally:
        done.set()
        thread.join(30)
    return procs


def all_complete() -> bool:
    return not WorkflowInstance.objects.exclude(status="complete").exists()


def test_the_cap_holds_with_four_runner_processes_and_the_http_tick_racing(
    runners,  # noqa: F811
    roomy_live_server,  # noqa: F811
    fleet,
    tmp_path,
):
    trace = tmp_path / "trace"
    services.instance_create_batch(
        workflow_name="fleet-capped",
        items=[{"id": f"c{n}", "params": {"sleep_ms": 30, "trace": str(trace)}} for n in range(40)],
    )
    race(runners, roomy_live_server, trace, all_complete)
    lines = [line.split() for line in trace.read_text().splitlines()]
    assert len(lines) == 40 * 2 * 2  # two steps each, start and end
    peak = max_overlap(lines)["all"]
    print(f"most fleet-capped callbacks at once: {peak} (cap 2)")
    assert 1 <= peak <= 2


def test_a_per_key_cap_holds_per_user_under_racing_runners(
    runners,  # noqa: F811
    roomy_live_server,  # noqa: F811
    fleet,
    tmp_path,
):
    trace = tmp_path / "trace"
    users = {f"u{n}": ["ann", "bob", "cy"][n % 3] for n in range(30)}
    services.instance_create_batch(
        workflow_name="fleet-per-user",
        items=[
            {"id": i, "params": {"user": user, "sleep_ms": 30, "trace": str(trace)}}
            for i, user in users.items()
        ],
    )
    race(runners, roomy_live_server, trace, all_complete)
    lines = [line.split() for line in trace.read_text().splitlines()]
    assert len(lines) == 30 * 2
    peaks = max_overlap(lines, key=users.get)
    print(f"most fleet-per-user callbacks at once per user: {peaks} (cap 1 each)")
    assert set(peaks) == {"ann", "bob", "cy"}
    assert max(peaks.values()) == 1


def test_two_runners_firing_the_same_schedule_create_one_instance_per_fire_time(
    runners,  # noqa: F811
    cron_fleet,
    transactional_db,
):
    from datetime import timedelta

    from workflows import cron, runtime
    from workflows.models import WorkflowSchedule

    modules = MODULES + ",tests.workflows.cron_workflows"
    for _ in range(2):
        runners.start(concurrency=2, modules=modules)
    rows = WorkflowSchedule.objects.filter(workflow_name="cron-minutely")
    wait_for(rows.exists, what="the runners to see the schedule")
    began = runtime.now()
    for _ in range(3):  # make it due now, three times over: both runners race for it each time
        rows.update(next_fire_at=runtime.now() - timedelta(seconds=1))
        wait_for(
            lambda: rows.filter(next_fire_at__gt=runtime.now()).exists(),
            what="a runner to fire the schedule",
        )
    wait_for(
        lambda: not WorkflowInstance.objects.exclude(status="complete").exists(),
        what="the fired instances to complete",
    )
    ended = runtime.now()
    ids = list(
        WorkflowInstance.objects.filter(workflow_name="cron-minutely").values_list(
            "instance_id", flat=True
        )
    )
    minutes = set()
    at = cron.latest_at_or_before("* * * * *", "UTC", began)
    while at <= ended:
        minutes.add(cron.instance_id(at))
        at += timedelta(minutes=1)
    assert ids and set(ids) <= minutes  # only fire times of this window, each at most once
    assert len(ids) == len(set(ids)) <= len(minutes)
