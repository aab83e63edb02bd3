"""The state of a graph run as graphs.decisions sees it: contexts per scope, tokens, fan-out
groups, loop counters and the journal of run events — plus the small writes on it that every
rule shares (record an event, spawn a token, fail the run). Pure: no database, no clock.

Scopes: "" is the run context; "0.1" is branch 1 of the fan-out made by token 0. Tokens are
node visits; `path` "0.1.2" is token 2 of that branch. Sequence numbers of events follow the
order of the writes, so a replay that makes the same decisions numbers them the same way.
"""

from dataclasses import dataclass, field

# Token statuses (the GraphToken table uses the same words).
PENDING = "pending"
EXECUTING = "executing"
WAITING = "waiting_for_siblings"
COMPLETED = "completed"
FAILED = "failed"
TIMED_OUT = "timed_out"
CANCELLED = "cancelled"
LIVE = (PENDING, EXECUTING)


@dataclass
class Token:
    path: str
    node: str
    status: str
    scope: str
    seq: int
    parent: str | None = None
    fan_out: str | None = None
    branch_index: int | None = None
    branch_total: int | None = None
    output: object = None
    error: dict | None = None
    handled: bool = False  # it failed and a failure route took over (not a branch failure)


@dataclass
class Group:
    id: str
    fan_out: str
    fan_in: str | None
    origin: str
    parent_scope: str
    scopes: list[str]
    started_ms: int
    arrived: list[int] = field(default_factory=list)  # branch indexes, in arrival order
    done: bool = False
    # Set in a branch lane's copy of the group (graphs/lanes.py): arrivals are only noted
    # here ({"group", "index", "token", "at_ms"}) and the lane's parent joins them.
    lane_arrivals: list[dict] | None = None


@dataclass
class RunState:
    contexts: dict[str, dict]
    started_ms: int
    clock_ms: int
    tokens: dict[str, Token] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)
    scope_group: dict[str, str] = field(default_factory=dict)
    loops: dict[str, int] = field(default_factory=dict)
    seq: int = 0
    token_seq: int = 0
    journal: list[dict] = field(default_factory=list)
    dirty: set[str] = field(default_factory=set)  # token paths changed since the last flush
    context_dirty: bool = False
    outcome: tuple | None = None  # ("completed", output) | ("failed", error)
    max_fan_out: int | None = None  # the most branches one fan-out may open
    max_steps: int | None = None  # the engine's steps per run
    visits: int = 0  # nodes dispatched so far (each took at least one engine step)
    # Engine steps one fan-out branch takes at least, by the kind of its first node (the
    # interpreter version sets it: graphs.lanes.BRANCH_STEPS); other kinds take one.
    branch_steps: dict[str, int] = field(default_factory=dict)
    gated: bool = False  # the run timed out and waits at its human gate

    @property
    def context(self) -> dict:
        return self.contexts[""]


def record_event(state: RunState, type_: str, *, token: Token | None = None, data=None) -> None:
    state.seq += 1
    state.journal.append(
        {
            "sequence_number": state.seq,
            "type": type_,
            "token": token.path if token else "",
            "node": token.node if token else "",
            "data": data,
            "at_ms": state.clock_ms,
        }
    )


def touch(state: RunState, token: Token) -> None:
    state.dirty.add(token.path)


def spawn(state: RunState, node: str, *, scope: str, parent: str | None, branch=None) -> Token:
    number = state.counters.get(scope, 0)
    state.counters[scope] = number + 1
    path = f"{scope}.{number}" if scope else str(number)
    inherited = branch_of(state, scope)
    branch = branch or inherited
    state.token_seq += 1
    token = Token(
        path=path,
        node=node,
        status=PENDING,
        scope=scope,
        seq=state.token_seq,
        parent=parent,
        fan_out=branch[0] if branch else None,
        branch_index=branch[1] if branch else None,
        branch_total=branch[2] if branch else None,
    )
    state.tokens[path] = token
    touch(state, token)
    record_event(state, "token_spawned", token=token, data={"parent": parent})
    return token


def branch_of(state: RunState, scope: str):
    """(fan_out ref, index, total) of the innermost branch `scope` lies in, or None."""
    if not scope:
        return None
    group = state.groups[state.scope_group[scope]]
    index = group.scopes.index(scope)
    return (group.fan_out, index, len(group.scopes))


def fail_run(state: RunState, error: dict, *, token: Token | None = None) -> None:
    if state.outcome is not None:
        return
    for other in state.tokens.values():
        if other.status in (PENDING, EXECUTING, WAITING):
            other.status = CANCELLED
            touch(state, other)
    state.outcome = ("failed", error)
    record_event(state, "run_failed", token=token, data={"error": error})


def context_updated(state: RunState, scope: str, changes: dict, *, token: Token | None) -> None:
    if scope == "":
        state.context_dirty = True
    data = {"scope": scope, "changes": [{"path": p, "value": v} for p, v in changes.items()]}
    record_event(state, "context_updated", token=token, data=data)


def in_scope(token_scope: str, scope: str) -> bool:
    return token_scope == scope or token_scope.startswith(scope + ".")


def advance_clock(state: RunState, now_ms: int) -> None:
    state.clock_ms = max(state.clock_ms, now_ms)


def take_journal(state: RunState) -> tuple[list[dict], list[Token], bool]:
    """(events, changed tokens, run context changed) since the last take; clears them."""
    events, state.journal = state.journal, []
    tokens = [state.tokens[p] for p in sorted(state.dirty, key=lambda p: state.tokens[p].seq)]
    state.dirty = set()
    changed, state.context_dirty = state.context_dirty, False
    return events, tokens, changed
