"""Ingest benchmark: webhook accept rate and latency, normalize rate through one qcluster (ORM and
Redis brokers), the web worker's peak RSS for one 50 MB delivery, and (--big-pending) the
consumer's peak RSS with five 40 MB rows pending.

    .venv/bin/python bench/ingest.py [--n 5000] [--c 16] [--url URL] [--workers 3]
    .venv/bin/python bench/ingest.py --accept-only [--baseline-tree CHECKOUT]

--accept-only: the webhook beside bare gunicorn and an empty Django view, each with
the CPU split per delivery (client / web / PostgreSQL); bench/README.md › Webhook.

Without --url it creates a scratch PostgreSQL database (vf_bench by default, dropped and
re-created: never the tests' or anyone's working database), migrates it, and runs gunicorn on
loopback. The load generator is a small asyncio HTTP/1.1 client with keep-alive (pre-signed
bodies), so the client costs as little CPU as possible on a 2-core box. It prints figures; it
asserts nothing.

Targets: ≥ 1,000 accepted/s at C=16 with p99 ≤ 50 ms; ≥ 500 normalized/s with one
2-worker cluster; 50 MB accepted with peak RSS ≤ 4× the body. Issue 10: the consumer's peak RSS
with five 40 MB rows pending ≤ 4× one payload above its idle size.
"""

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
REDIS = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
SECRET = "bench-secret"
USERS = 50
PROMETHEUS_DIR = tempfile.mkdtemp(prefix="vf-bench-prometheus-")


# --- set-up ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(database_url: str, redis_url: str = "") -> dict:
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "TERRA_WEBHOOK_SECRET": SECRET,
        "TERRA_API_KEY": "bench-no-demo",  # no simulator: backfills are not part of the bench
        "TERRA_API_URL": "http://127.0.0.1:9",  # …and nothing reaches the real Terra
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
        "Q_CLUSTER_NAME": "vfbench",
        "PYTHONUNBUFFERED": "1",
        # as `manage.py serve` runs it: counters in files every process adds up
        "PROMETHEUS_MULTIPROC_DIR": PROMETHEUS_DIR,
    }


def recreate_database(name: str) -> str:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"{PG}/{name}"
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"],
        cwd=ROOT,
        env=server_env(url),
        check=True,
    )
    return url


def django_setup(database_url: str, redis_url: str = "") -> None:
    os.environ.update(server_env(database_url, redis_url))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def start_gunicorn(
    env: dict,
    port: int,
    workers: int,
    threads: int,
    app: str = "config.wsgi:application",
    tree: Path = ROOT,
) -> subprocess.Popen:
    """gunicorn as `manage.py serve` runs it (its config file; the bench sets the Prometheus
    multiprocess directory like serve does), without serve's access log. `tree`: the checkout
    whose code it serves (--baseline-tree: another commit, same database and client)."""
    args = [
        sys.executable,
        "-m",
        "gunicorn",
        app,
        "--config",
        "python:config.gunicorn_conf",
        "-b",
        f"127.0.0.1:{port}",
        "-w",
        str(workers),
        "--preload",
        "--log-level",
        "warning",
        "--timeout",
        "120",
        "--keep-alive",
        "30",
    ]
    if threads > 1:
        args += ["-k", "gthread", "--threads", str(threads)]
    if tree != ROOT:
        env = {**env, "PYTHONPATH": str(tree)}
    proc = subprocess.Popen(args, cwd=tree, env=env)
    wait_up(f"http://127.0.0.1:{port}/webhook/terra", proc)
    return proc


def wait_up(url: str, proc: subprocess.Popen | None = None) -> None:
    import httpx

    for _ in range(600):
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            if proc is not None and proc.poll() is not None:
                raise SystemExit("server exited during start-up") from None
            time.sleep(0.05)
    raise SystemExit(f"{url} did not come up")


def tree_cpu_seconds(pid: int) -> float:
    """user+system CPU of a process and its descendants (gunicorn/qcluster workers). Children
    that already exited count through their parent's cutime/cstime: the qcluster recycles its
    workers every 1,000 tasks, and leaving them out under-reported the cluster's CPU."""
    total, todo = 0.0, [pid]
    tick = os.sysconf("SC_CLK_TCK")
    while todo:
        current = todo.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(f) for f in fields[11:15]) / tick
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def pid_cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class BackendCpu:
    """CPU of the PostgreSQL backends serving the bench database (local server only): the
    database's share of each delivery or row, which the Python processes' figures leave out."""

    def __init__(self, dbname: str):
        self.dbname = dbname
        self.start: dict[int, float] = {}
        self.last: dict[int, float] = {}

    def _pids(self) -> list[int]:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                [self.dbname],
            )
            return [row[0] for row in cursor.fetchall()]

    def begin(self) -> None:
        self.start = {pid: pid_cpu_seconds(pid) for pid in self._pids()}
        self.last = dict(self.start)

    def sample(self) -> None:
        """Call while the backends live: a backend's CPU is lost once its connection closes."""
        for pid in self._pids():
            self.last[pid] = pid_cpu_seconds(pid)

    def seconds(self) -> float:
        return sum(cpu - self.start.get(pid, 0.0) for pid, cpu in self.last.items())


def machine_ticks() -> tuple[int, int]:
    """(all, idle+iowait) jiffies from /proc/stat, for the machine's busy share in a phase."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(values), values[3] + values[4]


def busy_percent(before: tuple[int, int], after: tuple[int, int]) -> float:
    total, idle = after[0] - before[0], after[1] - before[1]
    return round(100 * (1 - idle / total), 1) if total else 0.0


def load_average() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 1)[0]


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


# --- payloads ----------------------------------------------------------------------------


def bodies(n: int, salt: str) -> list[bytes]:
    """n distinct realistic deliveries (daily/sleep/activity for USERS users over past days)."""
    from demo import payloads as demo_payloads

    kinds = ("daily", "sleep", "activity")
    out = []
    today = date(2026, 7, 1)
    for i in range(n):
        user = f"bench{i % USERS}"
        day = today - timedelta(days=(i // USERS) // len(kinds))
        payload = demo_payloads.data_payload(kinds[(i // USERS) % len(kinds)], user, day)
        payload["bench"] = salt  # a new run's bodies never dedupe against an old run's
        out.append(json.dumps(payload, separators=(",", ":")).encode())
    return out


def request_bytes(host: str, port: int, path: str, body: bytes) -> bytes:
    from ingest.terra.signature import signature_header_value

    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Terra-Signature: {signature_header_value(body, secret=SECRET)}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


# --- load generator ------------------------------------------------------------------------


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length, close = 0, False
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            length = int(value)
        elif name.lower() == "connection" and value.strip().lower() == "close":
            close = True
    return status, await reader.readexactly(length), close


async def _worker(host, port, queue: list[bytes], latencies, statuses, answers):
    reader = writer = None
    while queue:
        request = queue.pop()
        if writer is None:
            reader, writer = await asyncio.open_connection(host, port)
        began = time.perf_counter()
        writer.write(request)
        status, body, close = await _read_response(reader)
        latencies.append(time.perf_counter() - began)
        statuses[status] = statuses.get(status, 0) + 1
        answers.append(body)
        if close:
            writer.close()
            reader = writer = None
    if writer is not None:
        writer.close()


def post_all(url: str, payloads: list[bytes], concurrency: int) -> dict:
    parts = urlsplit(url)
    host, port = parts.hostname, parts.port or 80
    requests = [request_bytes(host, port, parts.path or "/", b) for b in payloads]
    requests.reverse()  # workers pop from the end: send in order
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    answers: list[bytes] = []

    async def main():
        await asyncio.gather(
            *(
                _worker(host, port, requests, latencies, statuses, answers)
                for _ in range(concurrency)
            )
        )

    began = time.perf_counter()
    cpu_began = time.process_time()
    asyncio.run(main())
    wall = time.perf_counter() - began
    client_cpu = time.process_time() - cpu_began
    latencies.sort()
    return {
        "n": len(payloads),
        "concurrency": concurrency,
        "seconds": round(wall, 3),
        "accepted_per_s": round(statuses.get(200, 0) / wall, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 2),
        "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 2),
        "max_ms": round(latencies[-1] * 1000, 2),
        "statuses": statuses,
        # the load generator shares the 2 cores with the server: its cost per delivery
        "client_cpu_ms_per_delivery": round(client_cpu / len(payloads) * 1000, 2),
    }


# --- phases --------------------------------------------------------------------------------


def ensure_users() -> None:
    from django.contrib.auth import get_user_model

    User = get_user_model()
    for i in range(USERS):
        User.objects.get_or_create(username=f"bench{i}")


def reset_tables() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE raw_events, trace_events, daily_summary, sleep_sessions, activities, "
            "django_q_ormq, django_q_task, ingest_consume_tickets RESTART IDENTITY CASCADE"
        )


def counts() -> dict:
    from django.db.models import Count

    from ingest.models import RawEvent

    return dict(RawEvent.objects.values_list("state").annotate(n=Count("id")))


def drain_with_qcluster(env: dict, total: int, dbname: str) -> dict:
    """Start one qcluster (2 workers) and time it until no row is pending."""
    from ingest.models import RawEvent, RawEventState

    backends = BackendCpu(dbname)
    backends.begin()
    ticks = machine_ticks()
    load = load_average()
    cluster = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env={**env, "Q_WORKERS": "2"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    started = time.perf_counter()
    first = None
    cpu = 0.0
    try:
        while True:
            pending = RawEvent.objects.filter(state=RawEventState.PENDING).count()
            if first is None and pending < total:
                first = time.perf_counter()
            if pending == 0:
                break
            if time.perf_counter() - started > 600:
                break
            cpu = tree_cpu_seconds(cluster.pid)
            backends.sample()
            time.sleep(0.05)
        done = time.perf_counter()
        ticks_after = machine_ticks()
    finally:
        stop(cluster)
    busy = done - (first or started)
    return {
        "load_avg_1m_before": load,
        "rows": total,
        "seconds_from_first_row": round(busy, 2),
        "seconds_incl_startup": round(done - started, 2),
        "normalized_per_s": round(total / busy, 1) if busy else None,
        # includes the cluster's start-up and idle polling: an upper bound per row
        "cluster_cpu_ms_per_row": round(cpu / total * 1000, 2),
        "postgres_cpu_ms_per_row": round(backends.seconds() / total * 1000, 2),
        "machine_busy_percent": busy_percent(ticks, ticks_after),
        "states": counts(),
    }


def rss_peak_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def gunicorn_worker_pid(master: int) -> int:
    for _ in range(100):
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise SystemExit("no gunicorn worker")


def big_body(target: int) -> bytes:
    """A daily delivery padded with heart-rate samples to `target` bytes, where Terra puts them
    (data[].heart_rate_data.detailed.hr_samples: its large payloads are dense sample streams)."""
    from demo import payloads as demo_payloads

    payload = demo_payloads.daily_payload("bench0", date(2026, 6, 1))
    payload["data"][0]["heart_rate_data"]["detailed"] = {"hr_samples": ["SAMPLES"]}
    head, tail = json.dumps(payload, separators=(",", ":")).split('"SAMPLES"')
    sample = '{"timestamp":"2026-06-01T00:00:00.000000+01:00","bpm":64}'
    count = (target - len(head) - len(tail)) // (len(sample) + 1)
    return (head + ",".join([sample] * count) + tail).encode()


def big_delivery(env: dict) -> dict:
    port = free_port()
    master = start_gunicorn(env, port, workers=1, threads=1)
    try:
        worker = gunicorn_worker_pid(master.pid)
        import httpx

        httpx.get(f"http://127.0.0.1:{port}/webhook/terra")  # warm the worker up
        before = rss_peak_kb(worker)
        body = big_body(50 * 1024 * 1024 - 4096)
        from ingest.terra.signature import signature_header_value

        began = time.perf_counter()
        response = httpx.post(
            f"http://127.0.0.1:{port}/webhook/terra",
            content=body,
            headers={
                "Content-Type": "application/json",
                "Terra-Signature": signature_header_value(body, secret=SECRET),
            },
            timeout=120,
        )
        seconds = time.perf_counter() - began
        after = rss_peak_kb(worker)
    finally:
        stop(master)
    return {
        "body_mb": round(len(body) / 2**20, 2),
        "status": response.status_code,
        "seconds": round(seconds, 2),
        "worker_peak_rss_before_mb": round(before / 1024, 1),
        "worker_peak_rss_mb": round(after / 1024, 1),
        "peak_rss_over_body": round(after * 1024 / len(body), 2),
        "growth_over_body": round((after - before) * 1024 / len(body), 2),
    }


def tree_pids(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def big_rows_pending(env: dict, dbname: str, rows: int = 5, mb: int = 40) -> dict:
    """Peak RSS of the qcluster's worker processes while `rows` deliveries of `mb` MB each are
    pending: one task is published, its batch claim meets all of them. Also the
    cluster's and PostgreSQL's CPU per row (start-up excluded)."""
    import hashlib

    from ingest.models import RawEvent, RawEventState
    from ingest.queue import queue_publish

    reset_tables()
    body = big_body(mb * 1024 * 1024)
    ids = []
    for i in range(rows):
        unique = body.replace(b'"hr_samples":[', f'"bench_row":{i},"hr_samples":['.encode(), 1)
        ids.append(
            RawEvent.objects.create(
                event_type="daily",
                reference_id="bench0",
                body=unique,
                dedup_key=hashlib.sha256(unique).hexdigest(),
                signature_verified=True,
            ).pk
        )
    del body, unique
    cluster = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env={**env, "Q_WORKERS": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        time.sleep(5)  # start-up: the worker is idle (nothing is published yet)
        workers = [p for p in tree_pids(cluster.pid) if p != cluster.pid]
        idle = {pid: rss_peak_kb(pid) for pid in workers}
        load = load_average()
        backends = BackendCpu(dbname)
        backends.begin()
        cpu_before = tree_cpu_seconds(cluster.pid)
        began = time.perf_counter()
        queue_publish(ids[0])
        peak = dict(idle)
        while time.perf_counter() - began < 600:
            for pid in tree_pids(cluster.pid):
                with contextlib.suppress(FileNotFoundError):
                    peak[pid] = max(peak.get(pid, 0), rss_peak_kb(pid))
            backends.sample()
            done = RawEvent.objects.filter(pk__in=ids).exclude(state=RawEventState.PENDING).count()
            if done == rows:
                break
            time.sleep(0.1)
        seconds = time.perf_counter() - began
        cpu = tree_cpu_seconds(cluster.pid) - cpu_before
    finally:
        os.killpg(cluster.pid, signal.SIGTERM)
        try:
            cluster.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(cluster.pid, signal.SIGKILL)
    idle_kb = max(idle.values()) if idle else 0
    peak_kb = max(peak.values()) if peak else 0
    growth = (peak_kb - idle_kb) * 1024 / (mb * 1024 * 1024)
    return {
        "rows": rows,
        "row_mb": mb,
        "seconds": round(seconds, 1),
        "states": counts(),
        "process_idle_peak_mb": round(idle_kb / 1024, 1),
        "process_peak_rss_mb": round(peak_kb / 1024, 1),
        "growth_over_largest_payload": round(growth, 2),
        # includes the cluster's idle polling while the rows run
        "cluster_cpu_s_per_row": round(cpu / rows, 2),
        "postgres_cpu_s_per_row": round(backends.seconds() / rows, 2),
        "load_avg_1m_before": load,
    }


def record_in_process(n: int, salt: str) -> None:
    """n signed deliveries recorded through the webhook's own function (raw_event_record: row,
    traces and queue publish in one transaction), without HTTP: the normalize bench's input."""
    from ingest.recording import raw_event_record
    from ingest.terra.signature import signature_header_value

    for body in bodies(n, salt):
        headers = {"Terra-Signature": signature_header_value(body, secret=SECRET)}
        raw_event_record(body=body, headers=headers, request_id="bench")


def noop_drain(env: dict, n: int, dbname: str) -> dict:
    """django-q2's own floor: n no-op tasks on the ORM broker drained by one 2-worker cluster
    (the same cluster settings as the consumer's), timed until the queue is empty."""
    from django.db import transaction
    from django_q.models import OrmQ
    from django_q.tasks import async_task

    from ingest.queue import _get_broker

    reset_tables()
    with transaction.atomic():
        for i in range(n):
            async_task("operator.pos", i, broker=_get_broker(), save=False)
    return _timed_cluster(env, n, dbname, lambda: OrmQ.objects.count())


def _timed_cluster(env: dict, total: int, dbname: str, left) -> dict:
    """Start one qcluster (2 workers) and time it until left() is 0, with the CPU split."""
    backends = BackendCpu(dbname)
    backends.begin()
    ticks = machine_ticks()
    load = load_average()
    cluster = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env={**env, "Q_WORKERS": "2"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    started = time.perf_counter()
    first = None
    cpu = cpu_at_first = 0.0
    try:
        while True:
            remaining = left()
            if first is None and remaining < total:
                first = time.perf_counter()
                cpu_at_first = cpu  # the cluster's start-up, left out of the per-unit figure
            if remaining == 0 or time.perf_counter() - started > 600:
                break
            cpu = tree_cpu_seconds(cluster.pid)
            backends.sample()
            time.sleep(0.05)
        done = time.perf_counter()
        ticks_after = machine_ticks()
    finally:
        stop(cluster)
    busy = done - (first or started)
    return {
        "load_avg_1m_before": load,
        "n": total,
        "seconds_from_first": round(busy, 2),
        "seconds_incl_startup": round(done - started, 2),
        "per_s": round(total / busy, 1) if busy else None,
        # from the first unit done (the cluster's start-up before it left out)
        "cluster_cpu_ms_each": round((cpu - cpu_at_first) / total * 1000, 2),
        "cluster_startup_cpu_s": round(cpu_at_first, 2),
        "postgres_cpu_ms_each": round(backends.seconds() / total * 1000, 2),
        "machine_busy_percent": busy_percent(ticks, ticks_after),
    }


def tickets_created() -> int | None:
    """How many shared consume tasks were queued (ingest.queue tickets; None before them)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('ingest_consume_tickets') IS NOT NULL")
        if not cursor.fetchone()[0]:
            return None
        cursor.execute("SELECT pg_get_serial_sequence('ingest_consume_tickets', 'id')")
        sequence = cursor.fetchone()[0]
        cursor.execute(f"SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {sequence}")
        return cursor.fetchone()[0]


def normalize_only(url: str, args) -> None:
    """Issue 15's normalization figure: one 2-worker cluster on the ORM broker draining N rows
    recorded as the webhook records them, beside django-q2's own no-op drain of N tasks, both
    in this run, each with the cluster / PostgreSQL CPU split and the load."""
    from ingest.models import RawEvent, RawEventState

    env = server_env(url)
    noop = noop_drain(env, args.n, args.db)
    print(f"[django-q2 no-op drain] {json.dumps(noop)}", flush=True)
    reset_tables()
    tickets_before = tickets_created()
    record_in_process(args.n, f"normalize-{time.time()}")
    pending = RawEvent.objects.filter(state=RawEventState.PENDING)
    drain = _timed_cluster(env, args.n, args.db, pending.count)
    drain["states"] = counts()
    # shared consume tasks queued while recording and draining (None: one task per row)
    drain["consume_tasks_queued"] = (
        None if tickets_before is None else tickets_created() - tickets_before
    )
    drain["over_noop_drain"] = round(drain["per_s"] / noop["per_s"], 2)
    print(f"[normalize, ORM broker] {json.dumps(drain)}", flush=True)


def database_counters(dbname: str) -> tuple[int, int]:
    """(transactions, rows inserted) so far in the bench database (pg_stat_database)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT xact_commit + xact_rollback, tup_inserted FROM pg_stat_database "
            "WHERE datname = %s",
            [dbname],
        )
        return cursor.fetchone()


def accept_phase(
    name: str, env: dict, args, app: str = "config.wsgi:application", tree: Path = ROOT
) -> dict:
    """Post args.n signed deliveries at args.c connections to `app` behind gunicorn; figures
    with the CPU split per request: the load generator (client), the gunicorn tree (web) and
    the bench database's PostgreSQL backends."""
    reset_tables()
    port = free_port()
    server = start_gunicorn(env, port, args.workers, args.threads, app, tree)
    try:
        target = f"http://127.0.0.1:{port}/webhook/terra"
        post_all(target, bodies(300, f"{name}-warm"), args.c)  # warm every worker
        reset_tables()
        if env.get("REDIS_URL"):
            import redis

            redis.Redis.from_url(env["REDIS_URL"]).delete("django_q:vfbench:q")
        payloads = bodies(args.n, f"{name}-{time.time()}")
        load = load_average()
        backends = BackendCpu(args.db)
        backends.begin()
        xacts, inserted = database_counters(args.db)
        ticks = machine_ticks()
        cpu_before = tree_cpu_seconds(server.pid)
        accept = post_all(target, payloads, args.c)
        web_ms = (tree_cpu_seconds(server.pid) - cpu_before) / args.n * 1000
        backends.sample()
        busy = busy_percent(ticks, machine_ticks())
        time.sleep(0.6)  # pg_stat_database is fed by the backends every 500 ms or so
        xacts_after, inserted_after = database_counters(args.db)
    finally:
        stop(server)
    pg_ms = backends.seconds() / args.n * 1000
    accept["web_cpu_ms_per_delivery"] = round(web_ms, 3)
    accept["postgres_cpu_ms_per_delivery"] = round(pg_ms, 3)
    accept["machine_cpu_ms_per_delivery"] = round(
        web_ms + pg_ms + accept["client_cpu_ms_per_delivery"], 3
    )
    accept["db_transactions_per_delivery"] = round((xacts_after - xacts) / args.n, 2)
    accept["db_rows_inserted_per_delivery"] = round((inserted_after - inserted) / args.n, 2)
    accept["machine_busy_percent"] = busy
    accept["load_avg_1m_before"] = load
    print(f"[{name}] accept: {json.dumps(accept)}", flush=True)
    return accept


FLOORS = (
    ("floor:bare-wsgi", "bench.wsgi_floor:bare"),
    ("floor:django-empty-view", "bench.wsgi_floor:django_empty"),
)


def accept_with_floors(url: str, args) -> dict:
    """The webhook (ORM broker) beside what gunicorn alone and an empty Django view cost, in the
    same run: the webhook's own share is its figure minus the empty view's."""
    env = server_env(url)
    results = {name: accept_phase(name, env, args, app) for name, app in FLOORS}
    if args.baseline_tree:
        tree = Path(args.baseline_tree).resolve()
        results["baseline"] = accept_phase(f"orm baseline {tree.name}", env, args, tree=tree)
    results["webhook"] = accept_phase("orm", env, args)
    empty, hook = results["floor:django-empty-view"], results["webhook"]
    print(
        "[summary] web CPU ms/delivery: webhook "
        f"{hook['web_cpu_ms_per_delivery']} (target <= 1.0), empty Django view "
        f"{empty['web_cpu_ms_per_delivery']}, bare gunicorn "
        f"{results['floor:bare-wsgi']['web_cpu_ms_per_delivery']}"
        + (
            f", baseline webhook {results['baseline']['web_cpu_ms_per_delivery']} "
            f"(PostgreSQL {results['baseline']['postgres_cpu_ms_per_delivery']}, "
            f"{results['baseline']['accepted_per_s']}/s)"
            if "baseline" in results
            else ""
        )
        + f"; PostgreSQL "
        f"{hook['postgres_cpu_ms_per_delivery']}; client {hook['client_cpu_ms_per_delivery']}; "
        f"accepted/s {hook['accepted_per_s']} (target >= 1000) p99 {hook['p99_ms']} ms "
        f"(target <= 50) at C={args.c}, gunicorn {args.workers}x{args.threads}; "
        f"load {hook['load_avg_1m_before']}",
        flush=True,
    )
    return results


def run_broker(name: str, url: str, redis_url: str, args) -> dict:
    env = server_env(url, redis_url)
    accept = accept_phase(name, env, args)
    drain = drain_with_qcluster(env, args.n, args.db)
    print(f"[{name}] drain:  {json.dumps(drain)}", flush=True)
    return {"accept": accept, "drain": drain}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="post to this running webhook URL instead (accept only)")
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--c", type=int, default=16)
    parser.add_argument("--db", default="vf_bench")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers")
    parser.add_argument("--threads", type=int, default=1, help="gunicorn threads per worker")
    parser.add_argument("--brokers", default="orm,redis")
    parser.add_argument("--skip-big", action="store_true")
    parser.add_argument(
        "--big-pending",
        action="store_true",
        help="only the consumer's peak RSS with five 40 MB rows pending",
    )
    parser.add_argument(
        "--normalize",
        action="store_true",
        help="only the normalize rate (ORM broker) beside django-q2's no-op drain",
    )
    parser.add_argument(
        "--accept-only",
        action="store_true",
        help="only the accept figures: bare gunicorn, an empty Django view and the webhook "
        "(ORM broker), side by side with the CPU split",
    )
    parser.add_argument(
        "--baseline-tree",
        help="with --accept-only: also measure the webhook of this checkout (e.g. a worktree "
        "of main) in the same run, same database schema",
    )
    parser.add_argument(
        "--reuse-db", action="store_true", help="keep the bench database from the last run"
    )
    args = parser.parse_args()

    if args.url:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        import django

        django.setup()
        print(json.dumps(post_all(args.url, bodies(args.n, str(time.time())), args.c)))
        return

    url = f"{PG}/{args.db}" if args.reuse_db else recreate_database(args.db)
    django_setup(url)
    ensure_users()
    print(
        f"vitalflow ingest bench · {os.cpu_count()} CPUs · PostgreSQL {args.db} · gunicorn "
        f"{args.workers}×{args.threads} · N={args.n} C={args.c}",
        flush=True,
    )
    if args.big_pending:
        print(
            f"[5×40MB pending] {json.dumps(big_rows_pending(server_env(url), args.db))}", flush=True
        )
        return
    if args.normalize:
        normalize_only(url, args)
        return
    if args.accept_only:
        accept_with_floors(url, args)
        return
    results = {}
    for broker in filter(None, args.brokers.split(",")):
        results[broker] = run_broker(broker, url, REDIS if broker == "redis" else "", args)
    if not args.skip_big:
        big = big_delivery(server_env(url))
        print(f"[50MB] {json.dumps(big)}", flush=True)


if __name__ == "__main__":
    main()
