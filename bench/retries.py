"""Retry lateness and recovery after a worker kill, through one real qcluster on PostgreSQL.
No drain schedule exists in the scratch database: only the in-cluster due poller and the
consumer's own batch claims can run these rows.

    .venv/bin/python bench/retries.py [--rows 40] [--db vf_bench_retries]

- lateness: N retrying rows due at staggered times over ~20 s; prints p50/p99/max of
  processed_at − next_attempt_at;
- recovery: a row whose normalizer hangs on its first claim; its worker is killed (SIGKILL)
  while it holds the row; prints the time from the kill to the row being processed by another
  worker (the lease, INGEST_LEASE_SECONDS, 90 s by default, bounds it).

It uses tests/ingest/qcluster_harness.py (a qcluster with extra test normalizers). It prints
figures; it asserts nothing.
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ingest import django_setup, load_average, recreate_database, server_env  # noqa: E402

HARNESS = ROOT / "tests" / "ingest" / "qcluster_harness.py"


def start_cluster(url: str, pid_file: Path, lease: str) -> subprocess.Popen:
    env = {
        **server_env(url),
        "INGEST_LEASE_SECONDS": lease,
        "HARNESS_PID_FILE": str(pid_file),
    }
    return subprocess.Popen(
        [sys.executable, str(HARNESS)], cwd=ROOT, env=env, start_new_session=True
    )


def stop_cluster(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def make_row(event_type: str, **fields):
    import hashlib
    import uuid

    from ingest.models import RawEvent

    return RawEvent.objects.create(
        event_type=event_type,
        payload={"type": event_type},
        dedup_key=hashlib.sha256(uuid.uuid4().bytes).hexdigest(),
        signature_verified=True,
        **fields,
    )


def wait_state(pks: list[int], state: str, seconds: float) -> None:
    from ingest.models import RawEvent

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if RawEvent.objects.filter(pk__in=pks, state=state).count() == len(pks):
            return
        time.sleep(0.2)


def lateness(rows: int) -> dict:
    from django.utils import timezone

    from ingest.models import RawEvent, RawEventState

    start = timezone.now() + timedelta(seconds=3)
    made = [
        make_row(
            "noop_test",
            state=RawEventState.RETRYING,
            attempts=1,
            next_attempt_at=start + timedelta(seconds=20 * i / rows),
        )
        for i in range(rows)
    ]
    due = {row.pk: row.next_attempt_at for row in made}
    wait_state(list(due), RawEventState.PROCESSED, 120)
    late = sorted(
        (row.processed_at - due[row.pk]).total_seconds()
        for row in RawEvent.objects.filter(pk__in=list(due), processed_at__isnull=False)
    )
    if not late:
        return {"rows": rows, "processed": 0}
    return {
        "rows": rows,
        "processed": len(late),
        "lateness_p50_s": round(statistics.median(late), 2),
        "lateness_p99_s": round(late[min(len(late) - 1, int(len(late) * 0.99))], 2),
        "lateness_max_s": round(late[-1], 2),
    }


def recovery(pid_file: Path) -> dict:
    from ingest.models import RawEvent, RawEventState
    from ingest.queue import queue_publish

    row = make_row("hang_once")
    queue_publish(row.pk)
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    if not pid_file.exists():
        return {"error": "the hanging normalizer never started"}
    time.sleep(0.5)
    os.kill(int(pid_file.read_text()), signal.SIGKILL)
    killed = time.time()
    wait_state([row.pk], RawEventState.PROCESSED, 300)
    row = RawEvent.objects.get(pk=row.pk)
    if row.processed_at is None:
        return {"error": f"not recovered in 300 s (state {row.state})"}
    return {
        "recovered_after_kill_s": round(row.processed_at.timestamp() - killed, 1),
        "claims": row.attempts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=40)
    parser.add_argument("--db", default="vf_bench_retries")
    parser.add_argument("--lease", default="90", help="INGEST_LEASE_SECONDS for the cluster")
    args = parser.parse_args()
    url = recreate_database(args.db)
    django_setup(url)
    pid_file = Path(f"/tmp/{args.db}-hang.pid")
    pid_file.unlink(missing_ok=True)
    cluster = start_cluster(url, pid_file, args.lease)
    try:
        time.sleep(3)  # cluster start-up
        print("load average at start:", load_average())
        print("retry lateness:", lateness(args.rows))
        print("recovery after a worker kill:", recovery(pid_file))
        print("load average at end:", load_average())
    finally:
        stop_cluster(cluster)
        pid_file.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
