"""Benchmark GET /v1/sync: a year of one user's data (≈2,000 rows) served on PostgreSQL.

    .venv/bin/python bench/sync.py [--db vf_bench_sync] [--runs 20] [--url http://host:port]

Without --url it (re)creates the database, migrates it, generates the data, starts gunicorn on
that database and pulls through real HTTP with httpx. It prints milliseconds per full pull
(every page until `next` is null) and per page, at several page sizes. Target: a full pull of
the year in ≤ 200 ms.
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="vf_bench_sync", help="PostgreSQL database (recreated)")
    parser.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432", help="server URL")
    parser.add_argument("--runs", type=int, default=20, help="full pulls per page size")
    parser.add_argument("--url", help="use this running server instead (needs --token)")
    parser.add_argument("--token", help="bearer token for --url")
    return parser.parse_args()


def recreate_database(pg: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def seed() -> tuple[str, int]:
    """A year for one user: daily summaries, sleep sessions and activities (+ a second user)."""
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from ingest.models import Activity, DailySummary, SleepSession
    from ops.services import user_token_create

    User = get_user_model()
    user = User.objects.create(username="bench")
    other = User.objects.create(username="noise")
    start = timezone.now() - timedelta(days=365)
    total = 0
    for who in (user, other):
        daily, sleep, acts = [], [], []
        for d in range(365):
            at = start + timedelta(days=d)
            daily.append(
                DailySummary(
                    user=who,
                    source="garmin",
                    date=at.date(),
                    steps=8000 + d,
                    distance_meters=6000.0,
                    total_burned_calories=2300.0,
                    resting_heart_rate=55.0,
                    heart_rate_variability=60.0,
                    sleep_minutes=420.0,
                    updated_at=at,
                )
            )
            sleep.append(
                SleepSession(
                    user=who,
                    source="oura",
                    record_key=f"s{d}",
                    start_time=at,
                    end_time=at + timedelta(hours=8),
                    sleep_minutes=420.0,
                    deep_sleep_minutes=80.0,
                    rem_sleep_minutes=90.0,
                    raw={"metadata": {"start_time": at.isoformat()}, "pad": "x" * 2000},
                    updated_at=at,
                )
            )
            for k in range(3 if d % 2 else 4):
                acts.append(
                    Activity(
                        user=who,
                        source="garmin",
                        record_key=f"a{d}-{k}",
                        start_time=at + timedelta(hours=k + 6),
                        name="run",
                        activity_type=k,
                        duration_seconds=1800.0,
                        calories=300.0,
                        raw={"pad": "x" * 2000},
                        updated_at=at,
                    )
                )
        DailySummary.objects.bulk_create(daily)
        SleepSession.objects.bulk_create(sleep)
        Activity.objects.bulk_create(acts)
        if who is user:
            total = len(daily) + len(sleep) + len(acts)
    _, raw = user_token_create(user=user)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return raw, total


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(env: dict) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            str(ROOT / ".venv/bin/gunicorn"),
            "config.wsgi",
            "-b",
            f"127.0.0.1:{port}",
            "-w",
            "1",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    import httpx

    for _ in range(100):
        try:
            httpx.get(url + "/v1/sync", timeout=1)
            return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("gunicorn did not start")


def full_pull(client, limit: int) -> tuple[float, list[float], int]:
    pages, rows = [], 0
    params = {"limit": limit}
    began = time.perf_counter()
    while True:
        t = time.perf_counter()
        response = client.get("/v1/sync", params=params)
        pages.append((time.perf_counter() - t) * 1000)
        response.raise_for_status()
        body = response.json()
        rows += body["count"]
        if not body["next"]:
            break
        params = {"limit": limit, "cursor": body["next"]}
    return (time.perf_counter() - began) * 1000, pages, rows


def main():
    args = parse_args()
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    env["DEBUG"] = "0"
    env["LOG_LEVEL"] = "WARNING"
    proc = None
    if args.url:
        if not args.token:
            raise SystemExit("--url needs --token")
        url, token, expected = args.url, args.token, None
    else:
        env["DATABASE_URL"] = f"{args.pg}/{args.db}"
        os.environ.update(
            {k: env[k] for k in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "DEBUG", "LOG_LEVEL")}
        )
        recreate_database(args.pg, args.db)
        token, expected = seed()
        proc, url = start_server(env)
    import httpx

    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as client:
            print(f"/v1/sync on {url} ({'database ' + args.db if proc else 'given server'})")
            for limit in (500, 1000, 2000):
                full_pull(client, limit)  # warm-up
                totals, pages, rows = [], [], 0
                for _ in range(args.runs):
                    total, page_ms, rows = full_pull(client, limit)
                    totals.append(total)
                    pages += page_ms
                if expected is not None and rows != expected:
                    raise SystemExit(f"pulled {rows} rows, expected {expected}")
                print(
                    f"limit={limit:5}: {rows} rows in {len(pages) // args.runs} page(s): "
                    f"full pull p50 {statistics.median(totals):.1f} ms, "
                    f"max {max(totals):.1f} ms; per page p50 {statistics.median(pages):.1f} ms "
                    f"({args.runs} runs)"
                )
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
