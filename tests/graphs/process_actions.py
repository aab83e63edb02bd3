"""Python actions for the real-process graph tests: each execution appends
"<node> <branch index> <pid>" to a trace file (and may sleep), so a test can count how often
every node ran for every token across runner crashes. Loaded by the runners through
WORKFLOWS_MODULES."""

import os
import time

from graphs import graph_action


@graph_action("tests.trace_items")
def trace_items(input: dict) -> dict:  # noqa: A002
    _trace(input["trace"], "load", "-")
    return {"items": list(range(input["count"]))}


@graph_action("tests.trace_work")
def trace_work(input: dict) -> dict:  # noqa: A002
    _trace(input["trace"], "work", input["index"])
    if input["index"] == input.get("slow_index"):
        time.sleep(input.get("sleep_ms", 0) / 1000)
    return {"value": input["index"] * 10}


@graph_action("tests.trace_done")
def trace_done(input: dict) -> dict:  # noqa: A002
    _trace(input["trace"], "done", "-")
    return {}


def _trace(path: str, node: str, index) -> None:
    with open(path, "a") as handle:
        handle.write(f"{node} {index} {os.getpid()}\n")
        handle.flush()


@graph_action("tests.many_items")
def many_items(input: dict) -> dict:  # noqa: A002
    return {"items": list(range(input["count"]))}
