"""A real `manage.py qcluster` with extra normalizers for the fault tests and bench/retries.py:
`noop_test` (always ok), `kill_worker` (SIGKILLs the worker process running it, as an OOM kill
would) and `hang_once` (on its first claim writes its pid to $HARNESS_PID_FILE and hangs, so
the caller can kill that worker; later claims are ok), `stall_once` (the first time, writes its
connection's backend pid to $HARNESS_STALL_DIR/backend, waits for $HARNESS_STALL_DIR/go, then
makes one round trip: the caller silences that connection in between; later claims are ok).
With $HARNESS_BUCKET_PORT, every
s3_payload ping is fetched from http://127.0.0.1:<port> (a local bucket stands in for a public
one: only the address check is replaced, the download is real).
Run as a script: python tests/ingest/qcluster_harness.py"""

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from ingest.registry import NormalizeResult, register  # noqa: E402


@register("noop_test")
def _noop(raw_event):
    return NormalizeResult(ok=True)


@register("kill_worker")
def _kill(raw_event):
    os.kill(os.getpid(), signal.SIGKILL)


@register("hang_once")
def _hang_once(raw_event):
    if raw_event.attempts == 1:
        Path(os.environ["HARNESS_PID_FILE"]).write_text(str(os.getpid()))
        time.sleep(3600)
    return NormalizeResult(ok=True)


@register("stall_once")
def _stall_once(raw_event):
    from django.db import connection

    folder = Path(os.environ["HARNESS_STALL_DIR"])
    if not (folder / "backend").exists():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend = cursor.fetchone()[0]
        (folder / "backend.tmp").write_text(str(backend))
        (folder / "backend.tmp").rename(folder / "backend")
        while not (folder / "go").exists():
            time.sleep(0.05)
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")  # into the silence
    return NormalizeResult(ok=True)


if os.environ.get("HARNESS_BUCKET_PORT"):
    import httpx

    from ingest.normalizers import s3_payload

    def _local_bucket(raw):
        path = httpx.URL(raw).raw_path.decode() if isinstance(raw, str) else "/"
        url = httpx.URL(f"http://127.0.0.1:{os.environ['HARNESS_BUCKET_PORT']}{path}")
        return s3_payload.Target(url, "127.0.0.1")

    s3_payload.check_url = _local_bucket

call_command("qcluster")
