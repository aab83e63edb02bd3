"""What a trace row costs the ingest path: inserts of raw events the way the webhook does them
(one transaction per delivery), without traces, with one trace inside the transaction, and with
one more trace after commit (its own transaction, like queue_published).

    .venv/bin/python bench/traces.py [--db vf_bench_sync | --sqlite] [-n 1000]

On PostgreSQL it uses an existing migrated database (bench/sync.py creates vf_bench_sync).
"""

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="vf_bench_sync")
    parser.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--sqlite", action="store_true", help="a fresh SQLite file instead")
    parser.add_argument("-n", type=int, default=1000)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["LOG_LEVEL"] = "WARNING"
    if args.sqlite:
        os.environ["DATABASE_URL"] = f"sqlite:///{tempfile.mkdtemp()}/traces.sqlite3"
    else:
        os.environ["DATABASE_URL"] = f"{args.pg}/{args.db}"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction

    call_command("migrate", verbosity=0)
    from ingest.models import RawEvent, TraceEvent
    from ingest.traces import trace_write

    payload = {"type": "daily", "user": {"user_id": "bench"}, "data": [{"steps": 1}] * 20}

    def deliver(i: int, *, inside: bool, after: bool, tag: str) -> None:
        with transaction.atomic():
            row = RawEvent.objects.create(
                event_type="daily",
                terra_user_id="bench",
                payload=payload,
                dedup_key=hashlib.sha256(f"{tag}-{i}".encode()).hexdigest(),
                request_id=f"rq-{tag}-{i}",
            )
            if inside:
                trace_write("webhook_received", raw_event_id=row.pk, data={"bytes": 900})
        if after:
            trace_write("queue_published", raw_event_id=row.pk)

    results = {}
    for tag, inside, after in (
        ("none", False, False),
        ("inside", True, False),
        ("inside+after", True, True),
    ):
        run = f"{tag}-{time.time_ns()}"
        samples = []
        for i in range(args.n):
            t = time.perf_counter()
            deliver(i, inside=inside, after=after, tag=run)
            samples.append((time.perf_counter() - t) * 1000)
        results[tag] = samples
        print(
            f"{connection.vendor:10} {tag:13} per delivery p50 {statistics.median(samples):.3f} ms"
            f"  p99 {sorted(samples)[int(len(samples) * 0.99) - 1]:.3f} ms  (n={args.n})"
        )
    base = statistics.median(results["none"])
    for tag in ("inside", "inside+after"):
        extra = statistics.median(results[tag]) - base
        print(f"{connection.vendor:10} cost of traces [{tag}]: +{extra:.3f} ms per delivery")
    RawEvent.objects.filter(terra_user_id="bench").delete()
    TraceEvent.objects.filter(event__in=["webhook_received", "queue_published"]).delete()


if __name__ == "__main__":
    main()
