"""A fan-out is bounded before it is built, in real runner processes on PostgreSQL: a
100,000-item foreach fails its node at once and the runner's memory does not grow with it (it
grew by gigabytes before); a maximal fan-out (GRAPHS_MAX_FAN_OUT branches) runs under two
runners with a short lease and every branch runs once — the interpreter never loses its lease
between steps (each boundary renews it; what runs between them is bounded by the fan-out
maximum and the step limit)."""

import signal
import time
from collections import Counter

import pytest

import tests.graphs.process_actions  # noqa: F401 - registers the actions in this process too
from graphs import services
from graphs.models import GraphRun, GraphToken
from tests.graphs.test_runner_processes import executions, start_runner, wait_for

pytestmark = [pytest.mark.postgres_only, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
MIB = 1024 * 1024


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak) of a process, in bytes."""
    found = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) * 1024
    return found


def foreach_doc(name: str, trace, count: int) -> dict:
    common = {"trace": {"value": str(trace)}}
    return {
        "name": name,
        "initial_node": "load",
        "nodes": [
            {
                "ref": "load",
                "action": {"kind": "python", "name": "tests.many_items"},
                "input_mapping": {"count": {"value": count}},
                "output_mapping": {"/items": "/items"},
            },
            {
                "ref": "work",
                "action": {"kind": "python", "name": "tests.trace_work"},
                "input_mapping": {**common, "index": "/branch/index"},
                "output_mapping": {"/r": "/value"},
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
                "synchronization": {"fan_out": "each", "merge": {"source": "/r", "target": "/all"}},
            },
        ],
    }


def run_of(name: str, trace, count: int) -> GraphRun:
    definition = services.definition_create(document=foreach_doc(name, trace, count))
    services.definition_publish(name=definition.name, version=definition.version)
    services.binding_create(name=name, definition=name)
    return services.run_create(binding_name=name, run_input={})


def status_of(run: GraphRun) -> str:
    return GraphRun.objects.get(pk=run.pk).instance.status


def stop(runner) -> None:
    if runner.poll() is None:
        runner.send_signal(signal.SIGTERM)
        try:
            runner.wait(15)
        except Exception:
            runner.kill()


def test_a_100000_item_foreach_fails_its_node_at_once_without_growing_the_runner(tmp_path):
    runner = start_runner(tmp_path, 0)
    try:
        warm = run_of("warm-up", tmp_path / "warm", 3)
        wait_for(lambda: status_of(warm) == "complete", timeout=60, what="the warm-up run")
        before = memory(runner.pid)

        started = time.monotonic()
        run = run_of("huge", tmp_path / "huge", 100_000)
        wait_for(lambda: status_of(run) == "errored", timeout=60, what="the huge fan-out to fail")
        elapsed = time.monotonic() - started
        after = memory(runner.pid)
    finally:
        stop(runner)

    load = GraphToken.objects.get(run=run, node_ref="load")
    assert load.status == "failed" and load.error["name"] == "FanOutTooLarge"
    assert "100000 branches" in load.error["message"]
    assert not GraphToken.objects.filter(run=run, node_ref="work").exists()
    grown = (after["VmHWM"] - before["VmHWM"]) / MIB
    assert grown < 64, f"the runner's peak memory grew by {grown:.0f} MiB"
    print(  # figures for the record (pytest -s), not assertions
        f"\n100,000-item foreach: errored {elapsed:.2f} s after run creation; runner peak "
        f"{before['VmHWM'] / MIB:.0f} -> {after['VmHWM'] / MIB:.0f} MiB"
    )


def test_a_maximal_fan_out_keeps_its_lease_under_two_runners(tmp_path, settings):
    count = settings.GRAPHS_MAX_FAN_OUT
    trace = tmp_path / "trace"
    env = {"WORKFLOWS_LEASE_SECONDS": "5"}
    runners = [start_runner(tmp_path, n, extra_env=env) for n in (0, 1)]
    try:
        time.sleep(1)  # both runners up: either may claim, and steal a lapsed lease
        before = [memory(r.pid) for r in runners]
        started = time.monotonic()
        run = run_of("maximal", trace, count)
        wait_for(lambda: status_of(run) == "complete", timeout=600, what="the maximal fan-out")
        elapsed = time.monotonic() - started
        after = [memory(r.pid) for r in runners]
    finally:
        for runner in runners:
            stop(runner)

    counts = executions(trace)
    assert counts[("done", "-")] == 1
    assert Counter(counts[("work", str(i))] for i in range(count)) == {1: count}
    run.refresh_from_db()
    assert len(run.context["all"]) == count
    grown = max(a["VmHWM"] - b["VmHWM"] for a, b in zip(after, before, strict=True)) / MIB
    assert grown < 256, f"a runner's peak memory grew by {grown:.0f} MiB"
    print(
        f"\nmaximal fan-out ({count} branches): complete in {elapsed:.1f} s; runner peaks "
        + ", ".join(
            f"{b['VmHWM'] / MIB:.0f} -> {a['VmHWM'] / MIB:.0f} MiB"
            for a, b in zip(after, before, strict=True)
        )
    )
