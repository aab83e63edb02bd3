"""Peak memory of a user's export: a year of one user's data with a 50 MB lab upload, exported by
`manage.py export_user` (a process of its own) and by GET /v1/me/export (one gunicorn worker).

    .venv/bin/python bench/export.py [--db vf_bench_export] [--upload-mb 50] [--deliveries 2]
                                     [--body-kb 0]

It (re)creates the PostgreSQL database, migrates it, records `--deliveries` deliveries per day of
each of daily, sleep, activity and body for 365 days (the simulator's payloads, revisions after
the first), normalizes them with the consumer, stores a lab upload of `--upload-mb` MB of random
bytes (incompressible: the zip's worst case) with its biomarkers, then prints for each path the
peak resident memory (the command's ru_maxrss; the worker's VmHWM), the same for a baseline that
does no export, the archive's size and the time taken. Figures, not assertions.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
USERNAME = "bench"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="vf_bench_export", help="PostgreSQL database (recreated)")
    parser.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432", help="server URL")
    parser.add_argument("--upload-mb", type=int, default=50)
    parser.add_argument("--deliveries", type=int, default=2, help="per type per day")
    parser.add_argument(
        "--body-kb", type=int, default=0, help="pad each delivery with samples to about this size"
    )
    return parser.parse_args()


def recreate_database(pg: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def seed(upload_mb: int, per_day: int, body_kb: int) -> dict:
    import hashlib
    import json

    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage
    from django.utils import timezone

    from ingest import demo_payloads
    from ingest.consumer import raw_events_consume_pending
    from ingest.models import RawEvent, TerraConnection
    from labs.models import Biomarker, LabUpload
    from ops.services import user_token_create

    user = get_user_model().objects.create(username=USERNAME)
    terra_user_id = demo_payloads.terra_user_id_for(USERNAME)
    TerraConnection.objects.create(user=user, terra_user_id=terra_user_id, provider="GARMIN")
    today = timezone.now().date()
    rows, body_bytes = [], 0
    for offset in range(365):
        day = today - timedelta(days=offset)
        for data_type in demo_payloads.DATA_TYPES:
            payload = demo_payloads.data_payload(data_type, USERNAME, day)
            if body_kb:  # heart-rate samples, as a wearable's detailed delivery carries
                payload["data"][0]["heart_rate_samples"] = [
                    {
                        "timestamp": f"{day}T{i // 3600 % 24:02d}:{i // 60 % 60:02d}",
                        "bpm": 50 + i % 90,
                    }
                    for i in range(body_kb * 1024 // 50)
                ]
            for revision in range(per_day):
                body = json.dumps({**payload, "revision": revision}).encode()
                body_bytes += len(body)
                rows.append(
                    RawEvent(
                        event_type=data_type,
                        terra_user_id=terra_user_id,
                        reference_id=USERNAME,
                        provider="GARMIN",
                        body=body,
                        signature_verified=True,
                        dedup_key=hashlib.sha256(body).hexdigest(),
                    )
                )
    RawEvent.objects.bulk_create(rows, batch_size=500)
    began = time.perf_counter()
    while raw_events_consume_pending(budget=timedelta(minutes=10)):
        pass
    normalize_s = time.perf_counter() - began
    content = b"%PDF-1.7\n" + os.urandom(upload_mb * 1024 * 1024)
    key = default_storage.save(f"lab-uploads/{USERNAME}/big.pdf", ContentFile(content))
    upload = LabUpload.objects.create(
        user=user,
        storage_key=key,
        content_type="application/pdf",
        size=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        terra_status="parsed",
    )
    del content
    for code in ("hemoglobin", "glucose", "ldl", "tsh"):
        Biomarker.objects.create(
            user=user,
            source="terra_lab",
            code=code,
            value=1.0,
            measured_on=today,
            lab_upload=upload,
        )
    _, token = user_token_create(user=user)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    from ingest.selectors import user_table_counts

    return {
        "token": token,
        "raw_events": len(rows),
        "raw_event_bytes": body_bytes,
        "normalize_s": normalize_s,
        "counts": user_table_counts(user=user),
    }


# Runs a management command in a fresh interpreter and prints its peak resident memory: VmHWM
# of the process's own address space (ru_maxrss would count the bench process it was forked
# from, which Linux carries across exec).
MEASURED = """
import sys, django
django.setup()
from django.core.management import call_command
call_command(*sys.argv[1:])
print(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")))
"""


def run_measured(args: list[str], env: dict) -> tuple[int, float]:
    """(peak RSS in KiB of the command's process, seconds)."""
    began = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", MEASURED, *args],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return int(out.split()[-1]), time.perf_counter() - began


def vm_hwm(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def over_http(env: dict, token: str, out: Path) -> dict:
    import socket

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [str(ROOT / ".venv/bin/gunicorn"), "config.wsgi", "-b", f"127.0.0.1:{port}"]
    argv += ["-w", "1", "--timeout", "300", "--log-level", "warning"]
    server = subprocess.Popen(argv, cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                httpx.get(url + "/healthz", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        worker = int(subprocess.check_output(["pgrep", "-P", str(server.pid)]).split()[0].decode())
        headers = {"Authorization": f"Bearer {token}"}
        httpx.get(url + "/v1/me", headers=headers, timeout=30)  # warm: imports, connection
        before = vm_hwm(worker)
        began = time.perf_counter()
        with httpx.stream("GET", url + "/v1/me/export", headers=headers, timeout=300) as answer:
            answer.raise_for_status()
            with open(out, "wb") as sink:
                for chunk in answer.iter_bytes():
                    sink.write(chunk)
        return {
            "before_kib": before,
            "peak_kib": vm_hwm(worker),
            "seconds": time.perf_counter() - began,
            "bytes": out.stat().st_size,
        }
    finally:
        server.terminate()
        server.wait(timeout=30)


def main():
    args = parse_args()
    var = Path(tempfile.mkdtemp(prefix="vf-bench-export-"))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": f"{args.pg}/{args.db}",
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
        "VAR_DIR": str(var),
        "REDIS_URL": "",
    }
    os.environ.update(env)
    recreate_database(args.pg, args.db)
    seeded = seed(args.upload_mb, args.deliveries, args.body_kb)
    print(
        f"seeded: {seeded['raw_events']} raw events ({seeded['raw_event_bytes'] / 2**20:.1f} MiB "
        f"of bodies, normalized in {seeded['normalize_s']:.1f} s), {seeded['counts']}, "
        f"a {args.upload_mb} MB upload; load {os.getloadavg()[0]:.1f}"
    )
    baseline, _ = run_measured(["check"], env)
    archive = var / "export.zip"
    peak, seconds = run_measured(["export_user", USERNAME, "--out", str(archive)], env)
    print(
        f"manage.py export_user: peak RSS {peak / 1024:.1f} MiB (manage.py check: "
        f"{baseline / 1024:.1f} MiB), {seconds:.1f} s, archive {archive.stat().st_size / 2**20:.1f}"
        " MiB"
    )
    http = over_http(env, seeded["token"], var / "http.zip")
    print(
        f"GET /v1/me/export (1 gunicorn worker): peak RSS {http['peak_kib'] / 1024:.1f} MiB "
        f"(before: {http['before_kib'] / 1024:.1f} MiB), {http['seconds']:.1f} s, "
        f"{http['bytes'] / 2**20:.1f} MiB"
    )


if __name__ == "__main__":
    main()
