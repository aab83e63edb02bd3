"""A graph run survives a runner kill -9 in the middle of its fan-out: real `runworkflows`
processes on PostgreSQL; every node runs once per token, except the one that was running when
the runner died (at most twice)."""

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection

import tests.graphs.process_actions  # noqa: F401 - registers the actions in this process too
from graphs import answers, services
from graphs.models import GraphRun, GraphToken

pytestmark = [pytest.mark.postgres_only, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
BRANCHES = 6
SLOW = 2


def start_runner(tmp_path, n: int, extra_env: dict | None = None) -> subprocess.Popen:
    s = connection.settings_dict
    url = f"postgres://{s['USER']}:{s['PASSWORD']}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "WORKFLOWS_MODULES": "tests.graphs.process_actions",
        "WORKFLOWS_LEASE_SECONDS": "2",
        "LOG_LEVEL": "WARNING",
        **(extra_env or {}),
    }
    log = open(tmp_path / f"runner-{n}.log", "w")  # noqa: SIM115
    cmd = [sys.executable, "manage.py", "runworkflows", "--poll", "0.1", "--concurrency", "1"]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=log)


def wait_for(predicate, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def executions(trace: Path) -> Counter:
    lines = trace.read_text().splitlines() if trace.exists() else []
    return Counter(tuple(line.split()[:2]) for line in lines)


def fan_out_document(trace: Path) -> dict:
    common = {"trace": {"value": str(trace)}}
    return {
        "name": "crash-fan-out",
        "initial_node": "load",
        "nodes": [
            {
                "ref": "load",
                "action": {"kind": "python", "name": "tests.trace_items"},
                "input_mapping": {**common, "count": {"value": BRANCHES}},
                "output_mapping": {"/items": "/items"},
            },
            {
                "ref": "work",
                "action": {"kind": "python", "name": "tests.trace_work"},
                "input_mapping": {
                    **common,
                    "index": "/branch/index",
                    "slow_index": {"value": SLOW},
                    "sleep_ms": {"value": 4000},
                },
                "output_mapping": {"/result": "/value"},
                "retries": {"limit": 3, "delay": "1 second"},
            },
            {
                "ref": "done",
                "action": {"kind": "python", "name": "tests.trace_done"},
                "input_mapping": common,
            },
        ],
        "transitions": [
            {"ref": "each", "from": "load", "to": "work", "foreach": {"collection": "/items"}},
            {
                "from": "work",
                "to": "done",
                "synchronization": {
                    "fan_out": "each",
                    "merge": {"source": "/result", "target": "/results", "strategy": "append"},
                },
            },
        ],
    }


def test_kill_9_mid_fan_out_completes_with_each_node_once_per_token(tmp_path):
    trace = tmp_path / "trace"
    definition = services.definition_create(document=fan_out_document(trace))
    services.definition_publish(name=definition.name, version=definition.version)
    services.binding_create(name="crash", definition=definition.name)
    run = services.run_create(binding_name="crash", run_input={})

    first = start_runner(tmp_path, 0)
    try:
        wait_for(lambda: ("work", str(SLOW)) in executions(trace), what="the slow branch to start")
        first.kill()  # SIGKILL mid-branch: the lease must expire, replay must not redo finished nodes
        first.wait(5)
        second = start_runner(tmp_path, 1)
        try:
            wait_for(
                lambda: GraphRun.objects.get(pk=run.pk).instance.status == "complete",
                timeout=90,
                what="the run to complete after the crash",
            )
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(15)
    finally:
        if first.poll() is None:
            first.kill()

    counts = executions(trace)
    assert counts[("load", "-")] == 1 and counts[("done", "-")] == 1
    for index in range(BRANCHES):
        expected = (1, 2) if index == SLOW else (1,)
        assert counts[("work", str(index))] in expected, (index, counts)
    run.refresh_from_db()
    assert run.context["results"] == [i * 10 for i in range(BRANCHES)]
    statuses = Counter(GraphToken.objects.filter(run=run).values_list("status", flat=True))
    assert statuses == {"completed": BRANCHES + 2}
    numbers = list(
        run.run_events.order_by("sequence_number").values_list("sequence_number", flat=True)
    )
    assert numbers == list(range(1, len(numbers) + 1))


def waiting_fan_out_document(trace: Path) -> dict:
    """load → foreach: ask (human) → work (traced; SLOW sleeps) → fan-in all → done."""
    document = fan_out_document(trace)
    document["name"] = "crash-waiting-fan-out"
    document["nodes"].append(
        {"ref": "ask", "action": {"kind": "human", "event_type": "answer", "timeout": "1 hour"}}
    )
    document["transitions"][0]["to"] = "ask"
    document["transitions"].append({"from": "ask", "to": "work"})
    return document


def test_kill_9_while_answered_branches_run_completes_with_each_node_once_per_token(tmp_path):
    trace = tmp_path / "trace"
    definition = services.definition_create(document=waiting_fan_out_document(trace))
    services.definition_publish(name=definition.name, version=definition.version)
    services.binding_create(name="crash-wait", definition=definition.name)
    run = services.run_create(binding_name="crash-wait", run_input={})
    asks = GraphToken.objects.filter(run=run, node_ref="ask", status="executing")

    first = start_runner(tmp_path, 0)
    try:
        wait_for(lambda: asks.count() == BRANCHES, what="every branch to wait for its answer")
        for index in (5, 2, 0, 3, 1, 4):  # answers in any order, each naming its branch
            answers.run_answer(run_id=run.run_id, type="answer", payload={}, token=f"0.{index}.0")
        wait_for(lambda: ("work", str(SLOW)) in executions(trace), what="the slow branch to start")
        first.kill()
        first.wait(5)
        second = start_runner(tmp_path, 1)
        try:
            wait_for(
                lambda: GraphRun.objects.get(pk=run.pk).instance.status == "complete",
                timeout=90,
                what="the run to complete after the crash",
            )
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(15)
    finally:
        if first.poll() is None:
            first.kill()

    counts = executions(trace)
    assert counts[("load", "-")] == 1 and counts[("done", "-")] == 1
    for index in range(BRANCHES):
        expected = (1, 2) if index == SLOW else (1,)
        assert counts[("work", str(index))] in expected, (index, counts)
    run.refresh_from_db()
    assert sorted(run.context["results"]) == [i * 10 for i in range(BRANCHES)]
    statuses = Counter(GraphToken.objects.filter(run=run).values_list("status", flat=True))
    assert statuses == {"completed": 2 * BRANCHES + 2}
    numbers = list(
        run.run_events.order_by("sequence_number").values_list("sequence_number", flat=True)
    )
    assert numbers == list(range(1, len(numbers) + 1))
