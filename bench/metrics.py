"""Benchmark a /metrics scrape on PostgreSQL with millions of finished rows: the scrape-time
gauges must read only the small unfinished sets (indexes), not the big tail.

    .venv/bin/python bench/metrics.py [--db vf_bench_metrics] [--rows 2000000] [--runs 20]

(Re)creates the database, migrates it, inserts --rows processed raw events and 2,000 finished
workflow instances per 100,000 rows (plus a few hundred unfinished of each), ANALYZEs, then
times the scrape's gauge queries (the same collector /metrics runs) and prints the median and
p95 in milliseconds, and the plans' node types (an index scan, never a Seq Scan on the tail).
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="vf_bench_metrics", help="PostgreSQL database (recreated)")
    parser.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432", help="server URL")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=20)
    return parser.parse_args()


def recreate_database(pg: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


SEED_SQL = """
INSERT INTO raw_events (event_type, terra_user_id, reference_id, provider, body,
    signature_verified, dedup_key, request_id, received_at, ordered_at, processed_at,
    process_error, attempts, state)
SELECT (ARRAY['daily','sleep','activity','body'])[1 + g %% 4], 'u' || (g %% 5000), '', 'GARMIN',
    '\\x7b7d'::bytea, true, md5(g::text), '', now() - (g || ' seconds')::interval,
    now() - (g || ' seconds')::interval,
    CASE WHEN g > %(open)s THEN now() END, NULL, 1,
    CASE WHEN g <= %(open)s THEN (ARRAY['pending','parked','retrying','dead'])[1 + g %% 4]
         ELSE 'processed' END
FROM generate_series(1, %(rows)s) g;
INSERT INTO workflow_instance (workflow_name, instance_id, version, status, run_number, request_id,
    priority, labels, created_at, updated_at)
SELECT 'bench', 'i' || g, 1,
    CASE WHEN g <= %(open)s THEN (ARRAY['errored','waiting','active'])[1 + g %% 3]
         ELSE 'complete' END, 1, '', 5, '{}'::jsonb, now(), now()
FROM generate_series(1, %(instances)s) g;
INSERT INTO workflow_task (instance_id, run_number, kind, priority, run_at, wait_event_type,
    lock_owner, fencing_token, claims, concurrency_group, created_at)
SELECT id, 1, 'wake', 0, now() + interval '1 hour', '', '', 0, 0, '', now()
FROM workflow_instance WHERE status IN ('waiting', 'active');
ANALYZE;
"""


def main() -> None:
    args = parse_args()
    recreate_database(args.pg, args.db)
    os.environ["DATABASE_URL"] = f"{args.pg}/{args.db}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    began = time.perf_counter()
    with connection.cursor() as cursor:
        # Integers only, formatted in: several statements cannot take bound parameters.
        sql = SEED_SQL % {"rows": args.rows, "open": 300, "instances": max(args.rows // 50, 1000)}
        for statement in filter(str.strip, sql.split(";")):
            cursor.execute(statement)
    print(f"seeded {args.rows:,} raw events in {time.perf_counter() - began:.1f} s")

    from django.test.utils import CaptureQueriesContext

    from ops.metrics import _ScrapeCollector

    def scrape() -> list:
        return list(_ScrapeCollector().collect())

    scrape()  # warm caches and connections
    timings = []
    for _ in range(args.runs):
        began = time.perf_counter()
        scrape()
        timings.append((time.perf_counter() - began) * 1000)
    timings.sort()
    p95 = timings[int(len(timings) * 0.95) - 1]
    print(
        f"scrape gauges over {args.rows:,} raw events: median {statistics.median(timings):.1f} ms, "
        f"p95 {p95:.1f} ms ({args.runs} runs)"
    )
    with CaptureQueriesContext(connection) as queries:
        scrape()
    seq = 0
    with connection.cursor() as cursor:
        for query in queries.captured_queries:
            cursor.execute("EXPLAIN " + query["sql"])
            plan = "\n".join(row[0] for row in cursor.fetchall())
            big = any(t in plan for t in ("Seq Scan on raw_events", "Seq Scan on workflow_inst"))
            seq += big
    print(f"{len(queries.captured_queries)} queries per scrape; seq scans of a big table: {seq}")
    slowest = max(queries.captured_queries, key=lambda q: float(q["time"]))
    print(f"slowest query {float(slowest['time']) * 1000:.1f} ms: {slowest['sql'][:160]}")


if __name__ == "__main__":
    main()
