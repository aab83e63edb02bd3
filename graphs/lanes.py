"""graph-run v2: a fan-out's branches run as lanes of one `step.parallel`.

A lane is one branch of a fan-out group: it runs the branch's tokens (and joins the fan-outs
nested in it the same way) on its own copy of the run state, until the branch arrives at a
fan-in, ends, or the run must stop. Lanes share nothing while they run, so the engine can
interleave them (a lane waiting on a `human` node suspends without holding the others) and a
replay re-enters them in the same order with the same results. What a lane did comes back as
its branch result — its tokens, unwritten run events, arrivals and the fan-in's merge value —
and the join applies the results in a fixed order (arrivals by time, then branch index), so
the state after the join depends only on the stored `parallel` row.

The join settles (`until`) as soon as the fan-in's strategy is met or can no longer be met, its
timeout fires (a timer branch sleeping until the deadline), a branch fails the run, or — with
no fan-in — a branch node fails; the lanes still running are then cancelled by the engine and
their token rows are cancelled in the projection. Run events are numbered as they are written
(lanes write in any order), so `sequence_number` is the order of the history as stored.

Step names: the join is `"<origin token> <fan-out ref>"`, its lanes `…/<branch index>/…`, the
timer `…/deadline/deadline`; before the lanes start, `"… open"` stores the spawned tokens, and
a lane that waited stores its rows in `"…/lane end"`. v3's human node is the race
`"<token> <node> answer"` (branches `any` and `token`).
"""

import copy
import dataclasses
from datetime import datetime

from django.db.models import Max

from graphs import decisions, pointers, spec
from graphs.executor import Executor, GraphRunFailed, from_ms, to_ms, write_projection
from graphs.fanin import (
    apply_fan_in_timeout,
    check_group,
    complete_group,
    fan_in_timeout_ms,
    needed_arrivals,
)
from graphs.models import GraphRunEvent, GraphToken
from graphs.spec import Graph
from graphs.state import CANCELLED, EXECUTING, FAILED, PENDING, WAITING, Group, RunState, Token
from workflows import ParallelError, WaitForEventTimeout, durations

CANCEL_SCOPE = "_cancel_scope"  # a journal entry that is a projection write, not a run event
MIN_WAIT_MS = 1000  # wait_for_event's shortest timeout
# Engine steps a branch takes at least, by its first node's kind: the node's own steps ("…
# start", waits, a child) and, since it waits, its lane's "lane end" record. v3's human node
# waits in a race of two. Sleeps and composite steps do not count toward the engine's limit.
BRANCH_STEPS = {"human": 3, "sleep": 2, "workflow": 3}
BRANCH_STEPS_TARGETED = {**BRANCH_STEPS, "human": 4}


class RunDeadline(BaseException):  # noqa: N818 - a signal, not an error: not caught as a failure
    """A human or sleep node reached the run's deadline (graph `timeout`) while waiting."""

    def __init__(self, at_ms: int):
        super().__init__(at_ms)
        self.at_ms = at_ms


class LaneExecutor(Executor):
    def __init__(self, step, run, graph: Graph, state: RunState, *, targeted: bool = False):
        super().__init__(step, run, graph, state)
        self.scope = ""
        self.joined: set[str] = set()
        self.timed_out = False
        self.waited = False  # this lane ran a human, sleep or workflow node
        # v3: a human node also answers to its token's own event type (spec.token_event_type)
        self.targeted = targeted
        state.branch_steps = BRANCH_STEPS_TARGETED if targeted else BRANCH_STEPS
        self.base_visits = 0  # the run's node visits when this lane forked (result "visits")

    write = staticmethod(lambda *args: write_numbered(*args))

    @classmethod
    def for_lane(cls, parent: "LaneExecutor", step, state: RunState, scope: str):
        lane = cls.__new__(cls)
        lane.__dict__.update(parent.__dict__)
        lane.step, lane.state, lane.scope = step, state, scope
        lane.base_visits = state.visits
        lane.persisted, lane.joined, lane.timed_out, lane.waited = set(), set(), False, False
        return lane

    # -- the top lane: the run -----------------------------------------------------------

    def run(self):
        self.advance()
        if self.state.outcome is None:
            if any(t.status in (PENDING, EXECUTING) for t in self.tokens()):
                raise RuntimeError("graph run has executing tokens but nothing to run")
            decisions.finish(self.graph, self.state)  # fails it when the output_schema says so
        outcome = self.state.outcome
        if outcome[0] == "failed":
            self.record("fail")
            raise GraphRunFailed(outcome[1].get("message", "graph run failed"))
        self.record("finish")
        return self.state.context

    def advance(self) -> None:
        """Run this lane's tokens and join its fan-outs until nothing is left to do here."""
        graph, state = self.graph, self.state
        while state.outcome is None:
            if decisions.past_deadline(graph, state):
                if self.scope:
                    self.timed_out = True  # the top lane applies the run's timeout
                    return
                decisions.apply_run_timeout(graph, state)
                continue
            if self.scope and arrivals(state):
                return
            group = self.next_group()
            if group is not None:
                self.join(group)
                continue
            pending = [t for t in self.tokens() if t.status == PENDING]
            if not pending:
                return
            self.dispatch(min(pending, key=lambda t: t.seq).path)

    def tokens(self):
        return (t for t in self.state.tokens.values() if t.scope == self.scope)

    def next_group(self) -> Group | None:
        for group in self.state.groups.values():
            if group.parent_scope != self.scope or group.id in self.joined:
                continue
            self.joined.add(group.id)
            if not group.done and group.scopes:
                return group
        return None

    def dispatch(self, path: str) -> None:
        try:
            super().dispatch(path)
        except RunDeadline as reached:  # the token stays executing: the run's timeout applies
            decisions.advance_clock(self.state, reached.at_ms)

    def wait_node(self, node, name: str, node_input: dict, started_ms: int):
        """human and sleep nodes wait at most until the run's deadline (then RunDeadline);
        v3's human node also takes an answer naming its token (answer())."""
        self.waited = True
        if node.kind not in ("human", "sleep"):
            return super().wait_node(node, name, node_input, started_ms)
        if node.kind == "sleep":
            wait_ms = durations.to_ms(node.action["duration"])
        else:
            wait_ms = durations.to_ms(node.action.get("timeout", spec.DEFAULT_HUMAN_TIMEOUT_MS))
        left = None
        if self.graph.timeout_ms is not None and not self.state.gated:
            left = self.state.started_ms + self.graph.timeout_ms - started_ms
        capped = left is not None and left < wait_ms
        if capped:
            if left < MIN_WAIT_MS:  # the engine's shortest wait; the deadline is (about) here
                raise RunDeadline(started_ms + max(left, 0))
            wait_ms = left
        if node.kind == "sleep":
            self.step.sleep(name, wait_ms)
            if capped:
                raise RunDeadline(started_ms + wait_ms)
            return None, False, started_ms + wait_ms
        try:
            event = self.answer(node.action["event_type"], name, wait_ms)
        except WaitForEventTimeout:
            if capped:
                raise RunDeadline(started_ms + wait_ms) from None
            return {"timed_out": True}, True, started_ms + wait_ms
        return event["payload"], False, to_ms(datetime.fromisoformat(event["timestamp"]))

    def answer(self, event_type: str, name: str, timeout_ms: int) -> dict:
        """The event a human node takes. v3: a race between an answer by event type (the first
        waiting branch takes it, as in v2) and one naming this token
        (spec.token_event_type), so a person can answer one of several waiting branches."""
        if not self.targeted:
            return self.step.wait_for_event(name, type=event_type, timeout=timeout_ms)
        path = name.split(" ", 1)[0]

        def wait(kind: str):
            return lambda step: step.wait_for_event("wait", type=kind, timeout=timeout_ms)

        try:
            _, event = self.step.race(
                f"{name} answer",
                {"any": wait(event_type), "token": wait(spec.token_event_type(event_type, path))},
            )
        except ParallelError as exc:
            if all(e.get("name") == "WaitForEventTimeout" for e in exc.errors.values()):
                raise WaitForEventTimeout(f"no {event_type!r} event for {name!r}") from None
            raise
        return event

    # -- a fan-out: one lane per branch ---------------------------------------------------

    def join(self, group: Group) -> None:
        name = f"{group.origin} {group.fan_out}"
        self.record(f"{name} open")  # the spawned tokens' rows before the lanes write theirs
        branches = {str(i): self.lane(group, i) for i in range(len(group.scopes))}
        timeout = fan_in_timeout_ms(self.graph, group)
        deadline = None if timeout is None else group.started_ms + timeout
        if deadline is not None:

            def timer(step):
                step.sleep_until("deadline", from_ms(deadline))
                return {"deadline": True}

            branches["deadline"] = timer
        results = self.step.parallel(
            name, branches, until=lambda done: settled(self.graph, group, done, deadline)
        )
        self.apply_join(group, results)

    def lane(self, group: Group, index: int):
        scope = group.scopes[index]

        def run(step):
            lane = LaneExecutor.for_lane(self, step, fork(self.state, scope), scope)
            lane.advance()
            if (
                lane.waited
                and lane.state.outcome is None
                and (lane.state.journal or lane.state.dirty)
            ):
                # It waited, so its siblings may still wait: store its rows now rather than at
                # the join (an answered human node must not look waiting to operators).
                lane.record("lane end")
            return lane.result(group, index)

        return run

    def result(self, group: Group, index: int) -> dict:
        state = self.state
        journal = state.journal
        outcome = None
        if state.outcome is not None:  # the run fails: the top lane records run_failed once
            outcome = state.outcome[1]
            journal = [e for e in journal if e["type"] != "run_failed"]
        found = arrivals(state)
        merge = None
        if group.fan_in is not None and any(a["group"] == group.id for a in found):
            sync = self.graph.transition(group.fan_in).sync
            if sync.merge is not None:
                value = pointers.get(state.contexts[group.scopes[index]], sync.merge.source)
                merge = {"value": None} if value is pointers.MISSING else {"value": value}
                merge["present"] = value is not pointers.MISSING
        return {
            "index": index,
            "clock_ms": state.clock_ms,
            "token_seq": state.token_seq,
            "visits": state.visits - self.base_visits,  # node visits this lane added
            "loops": state.loops,
            "tokens": [dataclasses.asdict(t) for t in state.tokens.values()],
            "journal": journal,
            "dirty": sorted(state.dirty),
            "arrivals": found,
            "merge": merge,
            "failed": [  # failures no route took over: with no fan-in, they fail the run
                t.path
                for t in state.tokens.values()
                if t.scope == self.scope and t.status == FAILED and not t.handled
            ],
            "outcome": outcome,
            "timed_out": self.timed_out,
        }

    def apply_join(self, group: Group, results: dict) -> None:
        """The lanes' results, in branch order, become this lane's state; then the fan-in
        counts the arrivals in time order, exactly as `settled` judged them."""
        graph, state = self.graph, self.state
        lanes = [results[str(i)] for i in range(len(group.scopes)) if str(i) in results]
        for lane in lanes:
            absorb(state, lane)
        for i, scope in enumerate(group.scopes):
            if str(i) not in results:  # cancelled while running: its rows are unknown here
                state.journal.append({"type": CANCEL_SCOPE, "scope": scope})
        error = next((lane["outcome"] for lane in lanes if lane["outcome"]), None)
        if error is not None:
            decisions.fail_run(state, error)
            return
        if any(lane["timed_out"] for lane in lanes):
            return  # advance() applies the run's timeout with the clock the lanes brought
        found = sorted(
            (a for lane in lanes for a in lane["arrivals"]), key=lambda a: (a["at_ms"], a["index"])
        )
        for arrival in found:
            if arrival["group"] != group.id:  # for an outer fan-in: this lane arrived there
                state.groups[arrival["group"]].lane_arrivals.append(arrival)
        if group.fan_in is None:
            failed = next((p for lane in lanes for p in lane["failed"]), None)
            if failed is not None:
                token = state.tokens[failed]
                decisions.fail_run(
                    state,
                    {
                        "name": "NodeFailed",
                        "message": f"node {token.node!r} failed",
                        "node": token.node,
                    },
                    token=token,
                )
            return
        transition = graph.transition(group.fan_in)
        values = {
            lane["index"]: lane["merge"]["value"] if lane["merge"]["present"] else pointers.MISSING
            for lane in lanes
            if lane["merge"] is not None
        }
        timeout = fan_in_timeout_ms(graph, group)
        needed = needed_arrivals(transition, len(group.scopes))
        for arrival in (a for a in found if a["group"] == group.id):
            if timeout is not None and arrival["at_ms"] - group.started_ms >= timeout:
                break  # stamped after the deadline: it does not count, the timeout applies
            group.arrived.append(arrival["index"])
            if len(group.arrived) >= needed:
                complete_group(graph, state, group, transition, values)
                return
        if timeout is not None and (
            "deadline" in results or any(a["at_ms"] - group.started_ms >= timeout for a in found)
        ):
            apply_fan_in_timeout(graph, state, group.id, values)
            return
        check_group(graph, state, group, transition)  # fails it: can no longer be met


def settled(graph: Graph, group: Group, results: dict, deadline: int | None) -> bool:
    """Whether the join is decided by the branches finished so far (`until` of the parallel)."""
    if "deadline" in results:
        return True
    lanes = [r for b, r in results.items() if b != "deadline"]
    if any(r["outcome"] or r["timed_out"] for r in lanes):
        return True
    if group.fan_in is None:
        return any(r["failed"] for r in lanes)
    mine = [a for r in lanes for a in r["arrivals"] if a["group"] == group.id]
    if deadline is not None and any(a["at_ms"] >= deadline for a in mine):
        return True
    needed = needed_arrivals(graph.transition(group.fan_in), len(group.scopes))
    if len(mine) >= needed:
        return True
    return len(mine) + len(group.scopes) - len(lanes) < needed


def arrivals(state: RunState) -> list[dict]:
    """What this lane's branches noted at fan-ins (lane copies of groups only)."""
    return [a for g in state.groups.values() if g.lane_arrivals for a in g.lane_arrivals]


def fork(state: RunState, scope: str) -> RunState:
    """The state a lane starts from: its scope's tokens (copies), its context, and copies of
    the groups it lies in, whose arrivals it only notes (Group.lane_arrivals)."""
    lane = RunState(
        contexts={"": state.contexts[""], scope: state.contexts[scope]},
        started_ms=state.started_ms,
        clock_ms=state.clock_ms,
        max_fan_out=state.max_fan_out,
        max_steps=state.max_steps,
        visits=state.visits,
        branch_steps=state.branch_steps,
        gated=state.gated,
    )
    lane.tokens = {p: dataclasses.replace(t) for p, t in state.tokens.items() if t.scope == scope}
    lane.counters = dict(state.counters)
    lane.groups = {
        gid: dataclasses.replace(g, arrived=list(g.arrived), lane_arrivals=[])
        for gid, g in state.groups.items()
    }
    lane.scope_group = dict(state.scope_group)
    lane.loops = dict(state.loops)
    lane.seq, lane.token_seq = state.seq, state.token_seq
    return lane


def absorb(state: RunState, lane: dict) -> None:
    for row in lane["tokens"]:
        state.tokens[row["path"]] = Token(**copy.deepcopy(row))
    state.journal.extend(lane["journal"])
    state.dirty.update(lane["dirty"])
    state.clock_ms = max(state.clock_ms, lane["clock_ms"])
    state.token_seq = max(state.token_seq, lane["token_seq"])
    state.visits += lane.get("visits", 0)  # absent from lanes stored before it was counted
    for ref, count in lane["loops"].items():
        state.loops[ref] = max(state.loops.get(ref, 0), count)


def write_numbered(run_pk: int, engine_run: int, events: list[dict], rows: list, context) -> None:
    """write_projection, numbering run events (and new tokens) after what is stored: lanes
    write in the order the engine runs them, which a replay does not repeat."""
    scopes = [e["scope"] for e in events if e["type"] == CANCEL_SCOPE]
    events = [e for e in events if e["type"] != CANCEL_SCOPE]
    stored = GraphRunEvent.objects.filter(run_id=run_pk, engine_run=engine_run)
    last = stored.aggregate(n=Max("sequence_number"))["n"] or 0
    events = [{**e, "sequence_number": last + i} for i, e in enumerate(events, 1)]
    if rows:
        tokens = GraphToken.objects.filter(run_id=run_pk, engine_run=engine_run)
        first = (tokens.aggregate(n=Max("sequence"))["n"] or 0) + 1
        rows = [(new, {**row, "sequence": first + i}) for i, (new, row) in enumerate(rows)]
    write_projection(run_pk, engine_run, events, rows, context)
    for scope in scopes:
        GraphToken.objects.filter(
            run_id=run_pk,
            engine_run=engine_run,
            path_id__startswith=f"{scope}.",
            status__in=(PENDING, EXECUTING, WAITING),
        ).update(status=CANCELLED)
