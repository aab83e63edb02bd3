"""Rows normalized per minute while pings to a bucket that trickles are pending, beside the same
cluster with no such ping, in one run: one real 2-worker qcluster on PostgreSQL.

    .venv/bin/python bench/slow_bucket.py [--pings 2] [--minutes 2] [--rate 5] [--db vf_bench_bucket]

A local bucket answers every GET with 200 and one byte every 10 s (as the bucket that held both
workers for 20 minutes did); the download deadline is the default
(TERRA_S3_PAYLOAD_DEADLINE_SECONDS, 30 s). Deliveries (`noop_test`, see
tests/ingest/qcluster_harness.py) are published at --rate per second for --minutes, first with
no ping pending (the baseline), then with --pings pings pending. It prints rows processed per
minute and the delay from publish to processed (p50/p99) for both phases, and what became of
the pings. It prints figures; it asserts nothing.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ingest import django_setup, load_average, recreate_database, server_env  # noqa: E402
from bench.retries import make_row, stop_cluster  # noqa: E402

HARNESS = ROOT / "tests" / "ingest" / "qcluster_harness.py"


def start_cluster(url: str, port: int):
    import subprocess

    env = {**server_env(url), "HARNESS_BUCKET_PORT": str(port)}
    return subprocess.Popen(
        [sys.executable, str(HARNESS)], cwd=ROOT, env=env, start_new_session=True
    )


def publish_steadily(rate: float, seconds: float) -> list[tuple[int, float]]:
    from ingest.queue import queue_publish

    published = []
    started = time.monotonic()
    n = 0
    while time.monotonic() - started < seconds:
        row = make_row("noop_test")
        queue_publish(row.pk)
        published.append((row.pk, time.time()))
        n += 1
        pause = started + n / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    return published


def phase(rate: float, minutes: float) -> dict:
    from ingest.models import RawEvent, RawEventState

    published = publish_steadily(rate, minutes * 60)
    ids = [pk for pk, _ in published]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if RawEvent.objects.filter(pk__in=ids, state=RawEventState.PROCESSED).count() == len(ids):
            break
        time.sleep(0.5)
    at = dict(published)
    done = RawEvent.objects.filter(pk__in=ids, processed_at__isnull=False)
    delays = sorted(row.processed_at.timestamp() - at[row.pk] for row in done)
    within = sum(1 for d in delays if d <= minutes * 60)
    return {
        "published": len(ids),
        "processed": len(delays),
        "processed_per_minute": round(within / minutes, 1),
        "delay_p50_s": round(statistics.median(delays), 2) if delays else None,
        "delay_p99_s": round(delays[min(len(delays) - 1, int(len(delays) * 0.99))], 2)
        if delays
        else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pings", type=int, default=2)
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--rate", type=float, default=5.0, help="deliveries published per second")
    parser.add_argument("--db", default="vf_bench_bucket")
    args = parser.parse_args()
    url = recreate_database(args.db)
    django_setup(url)
    from ingest.models import RawEvent
    from ingest.queue import queue_publish
    from tests.factories import RawEventFactory
    from tests.ingest.slow_bucket import trickling_bucket

    with trickling_bucket(interval=10.0, total=3600) as bucket:
        cluster = start_cluster(url, bucket["port"])
        try:
            time.sleep(3)  # cluster start-up
            print("load average at start:", load_average())
            print("no ping pending:", phase(args.rate, args.minutes))
            pings = []
            for n in range(args.pings):
                payload = {
                    "type": "s3_payload",
                    "status": "success",
                    "url": f"https://bucket.s3.amazonaws.com/payloads/{n}.json",
                    "expires_in": 3600,
                }
                row = RawEventFactory(event_type="s3_payload", payload=payload)
                queue_publish(row.pk)
                pings.append(row.pk)
            time.sleep(1)  # the pings are claimed first
            print(f"{args.pings} trickling pings pending:", phase(args.rate, args.minutes))
            states = RawEvent.objects.filter(pk__in=pings).values_list(
                "state", "attempts", "process_error"
            )
            print("the pings:", [(s, a, (e or "")[:60]) for s, a, e in states])
            print("bucket requests served:", bucket["requests"])
            print("load average at end:", load_average())
        finally:
            stop_cluster(cluster)
            os.environ.pop("HARNESS_BUCKET_PORT", None)


if __name__ == "__main__":
    main()
