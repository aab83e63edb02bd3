"""Workflows for the fault tests (tests/workflows/test_faults_*.py). Callbacks append
"<instance> <mark> <server epoch> <pid>" to params["trace"]; the time is the database's, so lines
written by runners with different wall clocks (faketime) compare."""

import os
import signal
import threading
from collections import Counter

from django.db import connection

from workflows import workflow


def mark(trace: str, instance_id: str, what: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extract(epoch FROM clock_timestamp())")
        server = float(cursor.fetchone()[0])
    with open(trace, "a") as f:
        f.write(f"{instance_id} {what} {server:.3f} {os.getpid()}\n")


def mark_and_count(trace: str, instance_id: str, what: str) -> int:
    """mark(), then how many `what` marks of the instance the trace holds, this one included."""
    mark(trace, instance_id, what)
    with open(trace) as f:
        return sum(1 for line in f if line.startswith(f"{instance_id} {what} "))


@workflow(name="fault-long-step")
def long_step(event, step):
    """One step of params["seconds"], longer than the lease: the runner must keep renewing."""
    p = event.payload

    def long():
        mark(p["trace"], event.instance_id, "long")
        threading.Event().wait(p["seconds"])  # not time.sleep: see fault_processes.faketime_env

    step.do("long", long)
    return "done"


@workflow(name="fault-sleep")
def sleep_between(event, step):
    p = event.payload
    step.do("before", lambda: mark(p["trace"], event.instance_id, "before"))
    step.sleep("nap", f"{p['seconds']} seconds")
    step.do("after", lambda: mark(p["trace"], event.instance_id, "after"))


@workflow(name="fault-retry")
def retry_once(event, step):
    """The first attempt fails; the retry is due params["seconds"] later."""
    p = event.payload

    def flaky():
        if mark_and_count(p["trace"], event.instance_id, "attempt") == 1:
            raise RuntimeError("first attempt fails")

    retries = {"limit": 1, "delay": f"{p['seconds']} seconds", "backoff": "constant"}
    step.do("flaky", flaky, retries=retries)


@workflow(name="fault-suicide")
def suicide(event, step):
    """Its second step kills the runner process, as an OOM kill or a segfault would."""
    p = event.payload
    step.do("fine", lambda: mark(p["trace"], event.instance_id, "fine"))

    def deadly():
        mark(p["trace"], event.instance_id, "deadly")
        os.kill(os.getpid(), signal.SIGKILL)

    step.do("deadly", deadly)


class RunnerDied(BaseException):  # noqa: N818 - stands in for a process death
    """Raised by a step to play a runner dying mid-step in harness tests: it is no Exception,
    so it unwinds tick() with the attempt's start committed and nothing after it."""


DEATHS: Counter = Counter()  # (instance id, step name) → deaths so far, in this process


@workflow(name="fault-dies-in-steps")
def dies_in_steps(event, step):
    """Each step of params["steps"] "kills its runner" the first params["deaths"][step] times."""
    p = event.payload

    for name in p["steps"]:

        def body(name=name):
            if DEATHS[(event.instance_id, name)] < p["deaths"].get(name, 0):
                DEATHS[(event.instance_id, name)] += 1
                raise RunnerDied(name)
            return name

        step.do(name, body)


@workflow(name="fault-dies-first")
def dies_first(event, step):
    """Its first step kills its process the first params["deaths"] times it runs."""
    p = event.payload

    def first():
        runs = mark_and_count(p["trace"], event.instance_id, "first")
        if runs <= p["deaths"]:
            os.kill(os.getpid(), signal.SIGKILL)
        return runs

    ran = step.do("first", first)
    return step.do("second", lambda: ran + 1)
