"""Console render benchmark: how long the instance page takes for an instance with 1,000 steps,
and the instances list (first page, no filter, and filtered by a time range) with 100,000
instances, on SQLite and on PostgreSQL.

    .venv/bin/python bench/console.py                    # both databases, 1,000 steps, 100,000 instances
    .venv/bin/python bench/console.py --db sqlite --instances 20000 --runs 3

Rows are built with bulk_create in a fresh database (SQLite: a temporary file; PostgreSQL:
BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/vf_console, dropped and created
again). The 1,000-step instance has a retried step every 50 steps (its "attempt failed" log
lines feed the waterfall's attempt bars) and a traceback on its failed ones; each of the
100,000 instances has one step (the list's "current step" and "last error" columns read it).
Pages are fetched through Django's test client as a logged-in superuser, after one warm-up
request; prints the median and the fastest of --runs fetches, in ms. Each database runs in a
child process (settings are read once per process). The machine may be shared: note `uptime`.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/vf_console"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def fresh_postgres(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres")).replace("postgres://", "postgresql://", 1)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def build(steps: int, instances: int) -> int:
    """The rows; answers the pk of the instance with `steps` steps."""
    from workflows.models import WorkflowInstance, WorkflowLog, WorkflowStep

    big = WorkflowInstance.objects.create(
        workflow_name="bench-long",
        instance_id="long",
        version=1,
        status="errored",
        params={"steps": steps},
        error={"name": "KeyError", "message": "'nope'"},
        created_at=T0,
        updated_at=T0 + timedelta(seconds=steps),
        started_at=T0,
        completed_at=T0 + timedelta(seconds=steps),
    )
    rows, logs = [], []
    for i in range(steps):
        start = T0 + timedelta(seconds=i)
        retried = i % 50 == 49
        rows.append(
            WorkflowStep(
                instance=big,
                run_number=1,
                name=f"item {i}",
                type="do",
                status="errored" if i == steps - 1 else "complete",
                attempts=3 if retried else 1,
                result=None if i == steps - 1 else {"i": i, "value": f"v{i}"},
                error=(
                    {"name": "KeyError", "message": "'nope'", "traceback": "Traceback …\nKeyError"}
                    if i == steps - 1
                    else None
                ),
                started_at=start,
                completed_at=start + timedelta(milliseconds=800),
            )
        )
        if retried:
            for attempt in (1, 2):
                at = start + timedelta(milliseconds=200 * attempt)
                logs.append(
                    WorkflowLog(
                        instance=big,
                        run_number=1,
                        level="warn",
                        category="system",
                        message=f"step 'item {i}' attempt {attempt} failed",
                        data={
                            "step": f"item {i}",
                            "attempt": attempt,
                            "retry_at": (at + timedelta(milliseconds=100)).isoformat(),
                            "error": "TimeoutError",
                        },
                        created_at=at,
                    )
                )
    WorkflowStep.objects.bulk_create(rows, batch_size=500)
    WorkflowLog.objects.bulk_create(logs, batch_size=500)
    batch = 5000
    for first in range(0, instances, batch):
        made = WorkflowInstance.objects.bulk_create(
            [
                WorkflowInstance(
                    workflow_name="bench-many",
                    instance_id=f"i-{n:07d}",
                    version=1,
                    status="complete" if n % 10 else "errored",
                    created_at=T0 + timedelta(seconds=n),
                    updated_at=T0 + timedelta(seconds=n + 2),
                    started_at=T0 + timedelta(seconds=n),
                    completed_at=T0 + timedelta(seconds=n + 2),
                )
                for n in range(first, min(first + batch, instances))
            ],
            batch_size=1000,
        )
        if made[0].pk is None:  # backends that do not return ids: read them back
            made = list(
                WorkflowInstance.objects.filter(workflow_name="bench-many").order_by("-id")[
                    : len(made)
                ]
            )
        WorkflowStep.objects.bulk_create(
            [
                WorkflowStep(
                    instance=i,
                    run_number=1,
                    name="only",
                    type="do",
                    status="complete" if i.status == "complete" else "errored",
                    attempts=1,
                    error=None if i.status == "complete" else {"name": "E", "message": "m"},
                    started_at=i.started_at,
                    completed_at=i.completed_at,
                )
                for i in made
            ],
            batch_size=1000,
        )
    return big.pk


def timed(client, url: str, runs: int) -> tuple[float, float]:
    response = client.get(url)  # warm-up: templates compiled, caches filled
    assert response.status_code == 200, (url, response.status_code)
    samples = []
    for _ in range(runs):
        began = time.perf_counter()
        response = client.get(url)
        samples.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 200
    return statistics.median(samples), min(samples)


def child(db: str, steps: int, instances: int, runs: int) -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    began = time.perf_counter()
    pk = build(steps, instances)
    built = time.perf_counter() - began
    user = get_user_model().objects.create_superuser("bench", "bench@example.com", "x")
    client = Client()
    client.force_login(user)
    pages = {
        f"instance page, {steps} steps": f"/admin/workflows/workflowinstance/{pk}/change/",
        f"instances list, {instances} instances": "/admin/workflows/workflowinstance/",
        f"instances list, {instances}, since/until": (
            "/admin/workflows/workflowinstance/?since=2026-01-01T06:00&until=2026-01-01T07:00"
        ),
        f"instances list, {instances}, errored": (
            "/admin/workflows/workflowinstance/?status__exact=errored"
        ),
    }
    out = {"db": db, "build_s": round(built, 1), "pages": {}}
    for label, url in pages.items():
        median, fastest = timed(client, url, runs)
        out["pages"][label] = {"median_ms": round(median, 1), "min_ms": round(fastest, 1)}
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("sqlite", "pg", "both"), default="both")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--instances", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--child", choices=("sqlite", "pg"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.steps, args.instances, args.runs)
        return
    for db in ("sqlite", "pg") if args.db == "both" else (args.db,):
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DEBUG": "false",
            "LOG_LEVEL": "WARNING",
        }
        with tempfile.TemporaryDirectory() as var:
            if db == "sqlite":
                env.pop("DATABASE_URL", None)
                env["VAR_DIR"] = var
            else:
                url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL)
                fresh_postgres(url)
                env["DATABASE_URL"] = url
            command = [sys.executable, __file__, "--child", db]
            command += ["--steps", str(args.steps), "--instances", str(args.instances)]
            command += ["--runs", str(args.runs)]
            result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            print(result.stderr[-3000:], file=sys.stderr)
            sys.exit(result.returncode)
        report = json.loads(result.stdout.strip().splitlines()[-1])
        print(f"{db}: rows built in {report['build_s']} s")
        for label, figures in report["pages"].items():
            print(
                f"  {label:<42} median {figures['median_ms']:>8.1f} ms   min {figures['min_ms']:>8.1f} ms"
            )


if __name__ == "__main__":
    main()
