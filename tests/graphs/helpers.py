"""Builders for graph tests: small definitions in the JSON vocabulary, and a pure driver that
runs decisions with fake action results (no database)."""

from graphs import decisions, spec
from graphs.actions import graph_action


@graph_action("tests.echo")
def echo(input: dict) -> dict:  # noqa: A002 - the action's documented argument name
    return dict(input)


@graph_action("tests.boom")
def boom(input: dict) -> dict:  # noqa: A002
    raise RuntimeError("boom")


def node(ref, kind="python", **extra) -> dict:
    action = {"kind": kind}
    if kind == "python":
        action["name"] = extra.pop("name", "tests.echo")
    action.update(extra.pop("action", {}))
    return {"ref": ref, "action": action, **extra}


def doc(nodes, transitions, initial=None, **extra) -> dict:
    return {
        "name": extra.pop("name", "g"),
        "initial_node": initial or nodes[0]["ref"],
        "nodes": nodes,
        "transitions": transitions,
        **extra,
    }


def parse(document, *, publishing=False) -> spec.Graph:
    return spec.parse(document, known_workflows={"child-wf"}, publishing=publishing)


class Failure(Exception):
    """A node failure for the Driver carrying what the executor adds (attempts, child)."""

    def __init__(self, message: str, **details):
        super().__init__(message)
        self.details = details


class Driver:
    """Runs a graph purely: `results` maps a node ref to its output (or a callable
    (state, path) → output, or an Exception to fail the node)."""

    def __init__(self, document, run_input=None, *, now_ms=0, **limits):
        self.graph = parse(document)
        self.state = decisions.start(self.graph, run_input or {}, now_ms=now_ms, **limits)
        self.dispatched: list[tuple[str, str]] = []

    def run(self, results: dict, *, at_ms=None, max_dispatch=10_000):
        for _ in range(max_dispatch):
            batch = decisions.decide(self.graph, self.state)
            if not batch:
                return None
            first = batch[0]
            if isinstance(first, decisions.Complete):
                decisions.finish(self.graph, self.state)
                if self.state.outcome[0] == "failed":
                    continue  # the output_schema refused the context
                return first
            if isinstance(first, decisions.Fail):
                return first
            if isinstance(first, decisions.FanInTimeout):
                decisions.apply_fan_in_timeout(self.graph, self.state, first.group)
                continue
            if isinstance(first, decisions.RunTimeout):
                decisions.apply_run_timeout(self.graph, self.state)
                continue
            path, ref = first.path, first.node
            self.dispatched.append((path, ref))
            decisions.node_started(self.state, path)
            result = results.get(ref, {})
            if callable(result):
                result = result(self.state, path)
            when = self.state.clock_ms if at_ms is None else at_ms(path, ref)
            if isinstance(result, Exception):
                error = {"name": type(result).__name__, "message": str(result)}
                error.update(getattr(result, "details", {}))  # e.g. {"attempts": 3}
                decisions.node_failed(self.graph, self.state, path, error, at_ms=when)
            else:
                decisions.node_completed(self.graph, self.state, path, result, at_ms=when)
        raise AssertionError("graph never finished")

    def events(self) -> list[str]:
        return [e["type"] for e in self.state.journal]

    def tokens(self) -> dict[str, tuple[str, str]]:
        return {p: (t.node, t.status) for p, t in self.state.tokens.items()}
