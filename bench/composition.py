"""Composition benchmark on PostgreSQL: a durable loop and a wide step.parallel.

    .venv/bin/python bench/composition.py                   # 5000 iterations, 100 branches
    .venv/bin/python bench/composition.py --iterations 1000 --branches 20

Shapes, each driven to completion by the engine's runner in one child process (threaded, as
`runworkflows` does):
- loop: `step.loop` of N iterations with one `step.do` each, keep=10, commit_every 1 and 10;
  prints wall time, iterations/s, commits/iteration and the step rows left afterwards;
- parallel: `step.parallel` of B branches with one `step.do` each; wall time and steps/s.
Commits = the pg_stat_database.xact_commit delta of a database only the child uses.

Database: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/vf_bench_composition).
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
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/vf_bench_composition"


def db_url(name: str | None = None) -> str:
    parts = urlsplit(os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL))
    return urlunsplit(parts._replace(path=f"/{name}" if name else parts.path))


def database() -> str:
    return urlsplit(db_url()).path.lstrip("/")


def admin_connect():
    import psycopg

    url = db_url("postgres").replace("postgres://", "postgresql://", 1)
    return psycopg.connect(url, autocommit=True)


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


def child(shape: str, size: int, commit_every: int) -> dict:
    import django

    django.setup()
    from workflows import services, workflow
    from workflows.engine import default_owner, run_one
    from workflows.models import WorkflowStep

    @workflow(name="bench-loop")
    def loop(event, step):
        n = event.payload["n"]

        def body(s, i):
            if i >= n:
                return s.loop_break(i)
            s.do("work", lambda: i)
            return s.loop_continue(i + 1)

        return step.loop("it", 0, body, commit_every=event.payload["every"], keep=10)

    @workflow(name="bench-par")
    def par(event, step):
        n = event.payload["n"]
        fns = {str(i): (lambda s, i=i: s.do("work", lambda: i)) for i in range(n)}
        return len(step.parallel("fan", fns))

    name = "bench-loop" if shape == "loop" else "bench-par"
    instance = services.instance_create(
        workflow_name=name,
        instance_id=f"{shape}-{os.getpid()}-{time.time_ns()}",
        params={"n": size, "every": commit_every},
    )
    owner, started = default_owner(), time.perf_counter()
    while True:
        run_one(owner=owner)
        instance.refresh_from_db()
        if instance.status in ("complete", "errored"):
            break
    seconds = time.perf_counter() - started
    if instance.status != "complete":
        raise RuntimeError(f"{shape} ended {instance.status}: {instance.error}")
    rows = WorkflowStep.objects.filter(instance=instance).count()
    return {"seconds": seconds, "rows": rows}


def run_child(shape: str, size: int, commit_every: int = 1) -> dict:
    before = commits()
    cmd = [sys.executable, __file__, "--child", shape, "--size", str(size)]
    cmd += ["--every", str(commit_every)]
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
    parser.add_argument("--child", choices=["loop", "parallel"])
    parser.add_argument("--size", type=int)
    parser.add_argument("--every", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=5000)
    parser.add_argument("--branches", type=int, default=100)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.size, args.every)))
        return
    with admin_connect() as conn:
        if not conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [database()]
        ).fetchone():
            conn.execute(f'CREATE DATABASE "{database()}"')
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=child_env(), check=True
    )
    print(f"on {database()}")
    n = args.iterations
    for every in (1, 10):
        r = run_child("loop", n, every)
        print(
            f"loop {n} iterations, commit_every={every:<3} {r['seconds']:7.2f} s  "
            f"{n / r['seconds']:8.1f} iterations/s  {r['commits'] / n:5.2f} commits/iteration  "
            f"{r['rows']} step rows left (keep=10)"
        )
    b = args.branches
    r = run_child("parallel", b)
    print(
        f"parallel {b} branches x 1 step          {r['seconds']:7.2f} s  "
        f"{b / r['seconds']:8.1f} steps/s      {r['commits'] / b:5.2f} commits/step"
    )


if __name__ == "__main__":
    main()
