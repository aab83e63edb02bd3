"""Graph workflow benchmark on PostgreSQL: a 100-branch foreach → fan-in graph run, beside the
same shape written as a code workflow with step.parallel.

    .venv/bin/python bench/graphs.py               # 100 branches, 3 runs of each shape
    .venv/bin/python bench/graphs.py --branches 20 --runs 1

Shapes (102 nodes/steps each): load → 100 × work (one per item) → done, with the branches'
results merged (graph: fan-in `all` + merge `append`). Graph runs are measured on the latest
`graph-run` version (branches as lanes of one step.parallel: what new runs use) and on v1
(branches one after another, kept for runs started before v2).
Each shape runs in its own child process that creates the run and drives it to completion with
the engine's runner in that process (threaded, as `runworkflows` does). Prints wall time,
nodes/s, commits per node — commits = the pg_stat_database.xact_commit delta of a database only
that child uses (read-only transactions count too), minus an idle child's — and CPU per node:
the child process's own CPU and its PostgreSQL backend's (from /proc; needs the server on
this host). The machine is shared: compare the rows of one run, and note `uptime`.

Database: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/vf_bench_graphs).
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
# This file is bench/graphs.py: without this, `import graphs` would find it instead of the app.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/vf_bench_graphs"


def db_url(name: str | None = None) -> str:
    parts = urlsplit(os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL))
    return urlunsplit(parts._replace(path=f"/{name}" if name else parts.path))


def database() -> str:
    return urlsplit(db_url()).path.lstrip("/")


def admin_connect():
    import psycopg

    return psycopg.connect(
        db_url("postgres").replace("postgres://", "postgresql://", 1), autocommit=True
    )


def commits() -> int:
    with admin_connect() as conn:
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", [database()]
        ).fetchone()
    return int(row[0])


def child_env() -> dict:
    return {
        **os.environ,
        "DATABASE_URL": db_url(),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
        "WORKFLOWS_WAKE_TASKS": "0",
    }


# -- the child: one measured process ------------------------------------------------------------


def graph_document(branches: int) -> dict:
    return {
        "name": f"bench-fan-{branches}",
        "initial_node": "load",
        "nodes": [
            {
                "ref": "load",
                "action": {"kind": "python", "name": "bench.items"},
                "input_mapping": {"n": {"value": branches}},
                "output_mapping": {"/items": "/items"},
            },
            {
                "ref": "work",
                "action": {"kind": "python", "name": "bench.work"},
                "input_mapping": {"item": "/branch/item"},
                "output_mapping": {"/r": "/value"},
            },
            {"ref": "done", "action": {"kind": "python", "name": "bench.done"}},
        ],
        "transitions": [
            {"ref": "each", "from": "load", "to": "work", "foreach": {"collection": "/items"}},
            {
                "from": "work",
                "to": "done",
                "synchronization": {
                    "fan_out": "each",
                    "merge": {"source": "/r", "target": "/rs", "strategy": "append"},
                },
            },
        ],
    }


def child(shape: str, branches: int, runs: int) -> dict:
    import django

    django.setup()
    from django.conf import settings

    from graphs import graph_action, services
    from workflows import services as engine
    from workflows import workflow
    from workflows.engine import default_owner, run_one

    settings.WORKFLOWS_WAKE_TASKS = False
    graph_action("bench.items")(lambda i: {"items": list(range(i["n"]))})
    graph_action("bench.work")(lambda i: {"value": i["item"] * 10})
    graph_action("bench.done")(lambda i: {})

    @workflow(name="bench-fan-code")
    def code(event, step):
        items = step.do("load", lambda: list(range(event.payload["n"])))
        if hasattr(step, "parallel"):
            branches_fns = {str(i): (lambda s, i=i: s.do("work", lambda: i * 10)) for i in items}
            results = step.parallel("fan", branches_fns)
            merged = [results[str(i)] for i in items]
        else:
            merged = [step.do(f"work {i}", lambda i=i: i * 10) for i in items]
        return step.do("done", lambda: len(merged))

    tag = f"{os.getpid()}-{time.time_ns()}"
    graph = shape.startswith("graph")
    if graph:
        from workflows.authoring import registry

        latest = registry.versions("graph-run")[-1]
        engine.workflow_version_activate(
            name="graph-run", version=1 if shape == "graph-v1" else latest
        )
    if graph and runs:
        name = f"bench-{tag}"
        document = {**graph_document(branches), "name": name}
        definition = services.definition_create(document=document)
        services.definition_publish(name=name, version=definition.version)
        services.binding_create(name=name, definition=name)
    owner = default_owner()
    backend = backend_cpu_reader()
    backend_before, cpu_before = backend(), time.process_time()
    started = time.perf_counter()
    for i in range(runs):
        if graph:
            run = services.run_create(binding_name=name, run_input={})
            instance = run.instance
        else:
            instance = engine.instance_create(
                workflow_name="bench-fan-code",
                instance_id=f"code-{tag}-{i}",
                params={"n": branches},
            )
        while True:
            outcome = run_one(owner=owner)
            instance.refresh_from_db()
            if instance.status in ("complete", "errored"):
                break
            if outcome is None:
                time.sleep(0.01)
        if instance.status != "complete":
            raise RuntimeError(f"{shape} run ended {instance.status}: {instance.error}")
    return {
        "seconds": time.perf_counter() - started,
        "cpu": time.process_time() - cpu_before,
        "backend_cpu": backend() - backend_before,
        "parallel": hasattr(__import__("workflows.step", fromlist=["Step"]).Step, "parallel"),
    }


def backend_cpu_reader():
    """CPU seconds (user + system) of this process's PostgreSQL backend, from /proc."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    ticks = os.sysconf("SC_CLK_TCK")

    def read() -> float:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / ticks

    return read


def run_child(shape: str, branches: int, runs: int) -> dict:
    before = commits()
    cmd = [
        sys.executable,
        __file__,
        "--child",
        shape,
        "--branches",
        str(branches),
        "--runs",
        str(runs),
    ]
    out = subprocess.run(cmd, cwd=ROOT, env=child_env(), capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{shape} child failed:\n{out.stderr[-3000:]}")
    time.sleep(0.7)  # backends flush their statistics when they exit
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["commits"] = commits() - before
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--child", choices=["graph", "graph-v1", "code"])
    parser.add_argument("--branches", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.branches, args.runs)))
        return
    with admin_connect() as conn:
        if not conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [database()]
        ).fetchone():
            conn.execute(f'CREATE DATABASE "{database()}"')
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=child_env(), check=True
    )
    nodes = args.branches + 2
    print(
        f"{args.runs} run(s) of load → {args.branches} branches → done ({nodes} nodes) on {database()}"
    )
    print(f"load: {Path('/proc/loadavg').read_text().strip()}")
    labels = {
        "graph-v1": "graph, graph-run v1 (branches one after another)",
        "graph": "graph, graph-run latest (branches as step.parallel lanes)",
        "code": "code workflow, step.parallel",
    }
    for shape in ("graph-v1", "graph", "code"):
        idle = run_child(shape, args.branches, 0)
        run_child(shape, args.branches, 1)  # warm-up
        result = run_child(shape, args.branches, args.runs)
        total_nodes = nodes * args.runs
        commits_net = result["commits"] - idle["commits"]
        print(
            f"{labels[shape]:<58} {result['seconds']:6.2f} s  "
            f"{total_nodes / result['seconds']:7.1f} nodes/s  "
            f"{commits_net / total_nodes:5.2f} commits/node  "
            f"{1000 * result['cpu'] / total_nodes:5.2f} ms CPU/node  "
            f"{1000 * result['backend_cpu'] / total_nodes:5.2f} ms PG CPU/node"
        )


if __name__ == "__main__":
    main()
