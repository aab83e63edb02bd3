"""A fan-out is bounded before it is built, in real runner processes on PostgreSQL: a
100,000-item foreach fails its node at once and the runner's memory does not grow with it (it
grew by gigabytes before); a maximal fan-out (GRAPHS_MAX_FAN_OUT branches) over a large run
context runs under two runners with a short lease and every branch runs once — the interpreter
never loses its lease between steps. Each step boundary renews the lease; what runs between
two boundaries (a replay of every branch, after the run waited) copies no context per branch,
so it stays far shorter than a lease (it took over a minute and 4 GB before)."""

import signal
import time
from collections import Counter

import pytest

import tests.graphs.process_actions  # noqa: F401 - registers the actions in this process too
from graphs import answers, services
from graphs.models import GraphRun, GraphToken
from tests.graphs.test_runner_processes import executions, start_runner, wait_for
from workflows.selectors import instance_steps

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


def foreach_doc(name: str, trace, count: int, *, then_ask: bool = False) -> dict:
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
            *(
                [{"ref": "ask", "action": {"kind": "human", "event_type": "go"}}]
                if then_ask
                else []
            ),
        ],
        "transitions": [
            {"ref": "each", "from": "load", "to": "work", "foreach": {"collection": "/items"}},
            {
                "from": "work",
                "to": "ask" if then_ask else "done",
                "synchronization": {"fan_out": "each", "merge": {"source": "/r", "target": "/all"}},
            },
            *([{"from": "ask", "to": "done"}] if then_ask else []),
        ],
    }


def run_of(name: str, trace, count: int, *, then_ask=False, run_input=None) -> GraphRun:
    document = foreach_doc(name, trace, count, then_ask=then_ask)
    definition = services.definition_create(document=document)
    services.definition_publish(name=definition.name, version=definition.version)
    services.binding_create(name=name, definition=name)
    return services.run_create(binding_name=name, run_input=run_input or {})


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
    instance = GraphRun.objects.get(pk=run.pk).instance
    loaded = instance_steps(instance=instance).get(name="0 load").completed_at
    refused = (instance.completed_at - loaded).total_seconds()
    print(  # figures for the record (pytest -s), not assertions
        f"\n100,000-item foreach: the run errored {refused:.3f} s after its load step stored "
        f"the items ({elapsed:.2f} s after run creation); runner peak "
        f"{before['VmHWM'] / MIB:.0f} -> {after['VmHWM'] / MIB:.0f} MiB"
    )


def test_a_maximal_fan_out_over_a_large_context_keeps_its_lease_under_two_runners(
    tmp_path, settings
):
    count = settings.GRAPHS_MAX_FAN_OUT
    trace = tmp_path / "trace"
    large = {"records": [{"n": i, "note": "abcdefghij"} for i in range(20_000)]}  # ~0.6 MB
    env = {"WORKFLOWS_LEASE_SECONDS": "5"}
    runners = [start_runner(tmp_path, n, extra_env=env) for n in (0, 1)]
    try:
        for n in (0, 1):  # both runners up and warm: either may claim, or take over a lease
            warm = run_of(f"warm-up-{n}", tmp_path / "warm", 3)
            wait_for(lambda w=warm: status_of(w) == "complete", timeout=60, what="a warm-up")
        before = [memory(r.pid) for r in runners]
        started = time.monotonic()
        run = run_of("maximal", trace, count, then_ask=True, run_input=large)
        waiting = GraphToken.objects.filter(run=run, node_ref="ask", status="executing")
        wait_for(waiting.exists, timeout=600, what="the fan-in, then the human node")
        fanned = time.monotonic() - started
        answered = time.monotonic()
        answers.run_answer(run_id=run.run_id, type="go", payload={})  # a replay of every branch
        wait_for(lambda: status_of(run) == "complete", timeout=120, what="the run to complete")
        replayed = time.monotonic() - answered
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
    peaks = ", ".join(
        f"{b['VmHWM'] / MIB:.0f} -> {a['VmHWM'] / MIB:.0f} MiB"
        for a, b in zip(after, before, strict=True)
    )
    print(
        f"\nmaximal fan-out ({count} branches, ~0.6 MB context): fanned out and joined in "
        f"{fanned:.1f} s; answer to completion (replay of every branch) {replayed:.1f} s; "
        f"runner peaks {peaks}"
    )
