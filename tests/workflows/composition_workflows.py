"""Workflows for the composition tests: parallel, race, loop, child workflows,
restart from a step. Imported by the tests and loaded by runner subprocesses through
WORKFLOWS_MODULES. Side effects go to params["trace"] (one line per callback execution)."""

from tests.workflows.sample_workflows import _trace
from workflows import ChildWorkflowError, NonRetryableError, ParallelError, workflow


@workflow(name="five-steps")
def five_steps(event, step):
    """params: {"trace": path}; steps s1..s5, each returning its number."""
    params = event.payload or {}
    out = []
    for i in range(1, 6):

        def run(i=i):
            _trace(params.get("trace"), f"s{i}")
            return i

        out.append(step.do(f"s{i}", run))
    return out


def _traced(params, line, value):
    def run():
        _trace(params.get("trace"), line)
        return value

    return run


@workflow(name="par-mixed")
def par_mixed(event, step):
    """A parallel step with a fast branch, a branch sleeping an hour and a branch that fails:
    returns what ParallelError carried."""
    params = event.payload or {}

    def fast(s):
        return s.do("work", _traced(params, "fast", "F"))

    def sleepy(s):
        s.sleep("nap", "1 hour")
        return s.do("work", _traced(params, "sleepy", "S"))

    def broken(s):
        def boom():
            _trace(params.get("trace"), "broken")
            raise NonRetryableError("no luck")

        return s.do("work", boom)

    try:
        step.parallel("fan", {"fast": fast, "sleepy": sleepy, "broken": broken})
    except ParallelError as exc:
        after = step.do("after", _traced(params, "after", "A"))
        return {"errors": exc.errors, "results": exc.results, "after": after}
    return "unreachable"


@workflow(name="par-ok")
def par_ok(event, step):
    """Three branches: a step, a sleep then a step, an event wait then a step."""
    params = event.payload or {}

    def a(s):
        return s.do("one", _traced(params, "a", 1))

    def b(s):
        s.sleep("nap", params.get("nap", "10 minutes"))
        return s.do("two", _traced(params, "b", 2))

    def c(s):
        got = s.wait_for_event("go", type="go", timeout="1 day")
        return s.do("three", _traced(params, "c", got["payload"]))

    out = step.parallel("fan", {"a": a, "b": b, "c": c})
    return out


@workflow(name="par-quorum")
def par_quorum(event, step):
    """Three branches waiting for events a, b, c; settled by the first two (until)."""
    params = event.payload or {}

    def waiter(kind):
        def run(s):
            got = s.wait_for_event("wait", type=kind, timeout="1 day")
            return s.do("after", _traced(params, kind, got["payload"]))

        return run

    return step.parallel(
        "fan", {k: waiter(k) for k in ("a", "b", "c")}, until=lambda results: len(results) >= 2
    )


@workflow(name="par-slow-steps")
def par_slow_steps(event, step):
    """For the kill -9 test: branches of several slow steps each."""
    params = event.payload or {}
    delay = params.get("delay", 0.3)

    def branch(tag):
        def run(s):
            total = 0
            for i in range(3):

                def work(i=i):
                    import time

                    _trace(params.get("trace"), f"{event.instance_id} {tag}/{i}")
                    time.sleep(delay)
                    return i

                total += s.do(f"s{i}", work)
            return total

        return run

    return step.parallel("fan", {t: branch(t) for t in ("a", "b", "c")})


@workflow(name="race-sleep")
def race_sleep(event, step):
    params = event.payload or {}

    def quick(s):
        s.sleep("nap", "1 minute")
        return s.do("work", _traced(params, "quick", "Q"))

    def slow(s):
        s.do("early", _traced(params, "slow-early", "E"))
        s.sleep("nap", "1 hour")
        return s.do("work", _traced(params, "slow", "S"))

    winner, result = step.race("pick", {"slow": slow, "quick": quick})
    return [winner, result]


@workflow(name="loop-count")
def loop_count(event, step):
    """params: {"n": iterations, "commit_every", "keep"}; one step per iteration."""
    params = event.payload or {}
    n = params.get("n", 10)

    def body(s, state):
        if state["i"] >= n:
            return s.loop_break(state["total"])
        value = s.do("add", lambda: state["i"])
        return s.loop_continue({"i": state["i"] + 1, "total": state["total"] + value})

    return step.loop(
        "count",
        {"i": 0, "total": 0},
        body,
        commit_every=params.get("commit_every", 1),
        keep=params.get("keep", 10),
    )


@workflow(name="loop-sleepy")
def loop_sleepy(event, step):
    """Each iteration sleeps a minute then runs a step: replays resume from stored state."""
    params = event.payload or {}

    def body(s, state):
        if state >= 3:
            return s.loop_break(state)
        s.sleep("tick", "1 minute")
        s.do("work", _traced(params, f"iter{state}", state))
        return s.loop_continue(state + 1)

    return step.loop("ticks", 0, body, commit_every=params.get("commit_every", 1), keep=2)


@workflow(name="child-ok")
def child_ok(event, step):
    params = event.payload or {}
    if params.get("nap"):
        step.sleep("nap", params["nap"])
    if params.get("delay"):
        import time

        def slow():
            _trace(params.get("trace"), f"child {event.instance_id}")
            time.sleep(params["delay"])
            return params.get("x", 0)

        return {"doubled": step.do("slow", slow) * 2}
    return {"doubled": step.do("double", lambda: params.get("x", 0) * 2)}


@workflow(name="child-bad")
def child_bad(event, step):
    def boom():
        raise NonRetryableError("child broke")

    return step.do("boom", boom)


@workflow(name="parent")
def parent(event, step):
    params = event.payload or {}
    good = step.run_workflow("make double", "child-ok", {"x": 21, **params.get("child", {})})
    try:
        step.run_workflow("try bad", "child-bad")
    except ChildWorkflowError as exc:
        return {"good": good, "bad": {"status": exc.status, "error": exc.error, "id": exc.id}}
    return {"good": good}


@workflow(name="parent-long")
def parent_long(event, step):
    """A child that sleeps a day: terminating the parent terminates it."""
    return step.run_workflow("wait", "child-ok", {"nap": "1 day"}, id=event.payload.get("id"))


@workflow(name="race-child")
def race_child(event, step):
    """The loser has a child still running: it is terminated with the race's decision."""

    def kid(s):
        return s.run_workflow("slow kid", "child-ok", {"nap": "1 day"})

    def quick(s):
        s.sleep("nap", "1 minute")
        return "quick"

    return list(step.race("pick", {"kid": kid, "quick": quick}))
