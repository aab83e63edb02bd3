"""Workflow engine benchmark on PostgreSQL: vitalflow side by side with DBOS Transact.

    .venv/bin/python bench/workflows.py            # everything (about 7 minutes)
    .venv/bin/python bench/workflows.py --quick    # smaller counts
    .venv/bin/python bench/workflows.py --only throughput   # or sequential, wake, capped, cron, gc
    .venv/bin/python bench/workflows.py --only makerun --db sqlite   # or postgres (default both)
    .venv/bin/python bench/workflows.py --faults   # fault figures only (about 2 minutes)

Prints, for sequential 3-step no-op workflows (create + run, one after another, one process):
workflows/s, steps/s and commits per step boundary for vitalflow and DBOS (both with the
server's default synchronous_commit=on, then both with synchronous_commit=off), with CPU per
step split into client (instance_create), runner and PostgreSQL (backends' /proc CPU) and round
trips and statements per step (bench/pgcost.py), PostgreSQL CPU and wall time of each of a
run's statements (create, claim, the 4 boundaries; a separate run of half as many workflows,
since timing each statement costs the runner CPU), the same CPU per step boundary, and the
commit floor (this server's INSERT + COMMIT round trip times the 5 synchronous commits of a run:
the steps/s that commit waits alone allow, and the CPU PostgreSQL spends on that INSERT), then
--pairs (default 4) alternating pairs of instance_run_here and DBOS children, ABBA, with the
median of their ratios (steadier than one ratio of two runs a minute apart), and what the commit
wait costs (the single runs with it on less those with it off: wall time per step for each
system, and per synchronous commit, wall and PostgreSQL CPU, for ours); throughput of 1, 2
and 4 `runworkflows` processes and of 2 processes x 4 threads over 2,000 instances with the claim rate every 2 s,
beside DBOS's queue worker draining as many enqueued workflows; and
wake latency after a 1 s sleep (p50/p99). Throughput rows also print the CPU per workflow of
the runner processes and of their PostgreSQL backends (from /proc), steadier than wall time on a
shared machine. Fleet: the claim rate of 4 runners with a concurrency cap set (global
cap, and a cap per key) beside the same runners with no cap, cron fire lateness (p50/p99 over 30
minutely schedules), and GC of 100,000 finished instances (instances/s and rows/s) while 2
runners keep running, with their throughput before and during the GC.

--only makerun starts `make run`'s process set (manage.py rundemo --no-feed: web, qcluster and
a runworkflows runner, supervised) on a fresh SQLite file and/or PostgreSQL database, acts as
the web would (services.instance_create / instance_send_event in this process), and prints wake
latency p50/p99 for sleeps, retries, event timeouts (woken code's wall time minus the stored due
time) and events (minus the time the send committed), then the runner's CPU over --idle seconds
of idleness, read from /proc/<pid>/stat.

Commits are counted with pg_stat_database.xact_commit deltas of a database only the measured
process uses (read-only transactions count too); a run of 0 workflows is subtracted so start-up
and shutdown costs are left out. Databases: BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/vf_bench_wf), the same server's <bench database>_dbos for
DBOS and <bench database>_makerun for --only makerun (dropped and created afresh).
DBOS is optional (pip install dbos); without it vitalflow's figures are printed alone.

--faults (docs/workflows/faults.md): instances errored while every runner backend is terminated
every 2 s (100 instances x 5 steps, 2 runners; must be 0), and lease steals by a runner whose
clock is 10 minutes fast or slow (libfaketime; steps of 10 s under a 2 s lease; must be 0).
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/vf_bench_wf"
ASYNC_OPTIONS = "options=-c%20synchronous_commit%3Doff"


def db_url(name: str | None = None, *, async_commit: bool = False) -> str:
    parts = urlsplit(os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL))
    path = f"/{name}" if name else parts.path
    return urlunsplit(parts._replace(path=path, query=ASYNC_OPTIONS if async_commit else ""))


def dbos_database() -> str:
    return urlsplit(db_url()).path.lstrip("/") + "_dbos"


def reset_dbos() -> None:
    """Empty DBOS's workflow tables (once its schema exists), as reset_tables does ours, so
    neither side runs on the dead rows of earlier runs (this server may not autovacuum)."""
    import psycopg

    with psycopg.connect(psycopg_url(db_url(dbos_database())), autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('dbos.workflow_status')").fetchone()[0]:
            conn.execute("TRUNCATE dbos.workflow_status CASCADE")


def psycopg_url(url: str) -> str:
    return url.replace("postgres://", "postgresql://", 1)


def admin_connect():
    import psycopg

    return psycopg.connect(psycopg_url(db_url("postgres")), autocommit=True)


def ensure_database(name: str) -> None:
    with admin_connect() as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def commits(name: str) -> int:
    with admin_connect() as conn:
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", [name]
        ).fetchone()
    return int(row[0])


WAL_COUNTERS = ("records", "full-page images", "bytes")


def wal_written() -> tuple[int, int, int]:
    """The server's WAL counters (pg_stat_wal: the whole server, so autovacuum's share is in it
    too; the bench database is the only one at work during a run)."""
    with admin_connect() as conn:
        row = conn.execute("SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal").fetchone()
    return tuple(int(value) for value in row)


SAMPLE_MODULES = "tests.workflows.sample_workflows,tests.workflows.fault_workflows,tests.workflows.fleet_workflows"
# Runners measured on noop3 load no capped workflow: a deployment that caps any workflow claims
# through the capped statement for all of them (workflows.engine.claim), measured separately.
UNCAPPED_MODULES = "tests.workflows.sample_workflows,tests.workflows.fault_workflows"


def child_env(*, async_commit: bool = False, modules: str = SAMPLE_MODULES) -> dict:
    return {
        **os.environ,
        "DATABASE_URL": db_url(async_commit=async_commit),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "WORKFLOWS_MODULES": modules,
        "DEBUG": "0",  # DEBUG=1 keeps every query in memory
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }


# -- children: one measured process each, so its commits can be counted alone --------------------


# The statements of one noop3 run in the order the runner sends them (workflows.engine).
RUN_STATEMENTS = (
    "claim",
    "boundary before step 1",
    "boundary between steps",
    "boundary between steps",
    "completion boundary",
)
# engine/here.py's instance_run_here: the create, the claim and the first boundary are one statement.
HERE_STATEMENTS = (
    "create + claim + boundary before step 1",
    "boundary between steps",
    "boundary between steps",
    "completion boundary",
)


def child_vitalflow(n: int, *, per_statement: bool = False, here: bool = False) -> dict:
    """`per_statement`: also time each statement (two /proc reads each, which the runner's CPU
    would include, so the bench runs it as a separate, smaller child). `here`: each workflow is
    created and run by instance_run_here (engine/here.py) in this process, as DBOS runs a workflow
    called directly; else instance_create (the client) and run_one (the runner)."""
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection

    from bench.pgcost import RoundTrips, StatementCosts, cpu_seconds
    from workflows import services
    from workflows.engine import default_owner, run_one
    from workflows.engine.here import instance_run_here

    settings.WORKFLOWS_WAKE_TASKS = False
    owner = default_owner()
    tag = os.getpid()
    connection.ensure_connection()
    backend = connection.connection.info.backend_pid
    trips = RoundTrips().install()
    costs = StatementCosts().install() if per_statement else None
    statements = {}  # name -> (count, backend CPU ns, wall s)
    cpu = {"client": 0.0, "runner": 0.0}
    backend_before = cpu_seconds(backend)
    started = time.perf_counter()
    names = HERE_STATEMENTS if here else ("create", *RUN_STATEMENTS)
    for i in range(n):
        trips.phase, before = "client", time.process_time()
        if not here:
            services.instance_create(workflow_name="noop3", instance_id=f"seq-{tag}-{i}")
        trips.phase, middle = "runner", time.process_time()
        if here:
            made = instance_run_here(
                workflow_name="noop3", instance_id=f"seq-{tag}-{i}", owner=owner
            )
            outcome = made.outcome
        else:
            # One claim runs a no-op workflow to completion; a runner's idle polls are not
            # counted.
            outcome = run_one(owner=owner)
        if outcome != "complete":
            raise RuntimeError(f"noop3 did not complete in one run: {outcome}")
        cpu["client"] += middle - before
        cpu["runner"] += time.process_time() - middle
        sent = costs.take() if costs else []
        # Runs that sent other statements (the first create of a process reads the deployment
        # through the ORM) are left out of the table.
        if len(sent) == len(names):
            for name, (ns, wall) in zip(names, sent, strict=True):
                count, total_ns, total_wall = statements.get(name, (0, 0, 0.0))
                statements[name] = (count + 1, total_ns + ns, total_wall + wall)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "cpu": {**cpu, "postgres": cpu_seconds(backend) - backend_before},
        "round trips": {p: trips.get(p, "round trips") for p in ("client", "runner")},
        "statements": {p: trips.get(p, "statements") for p in ("client", "runner")},
        "per statement": statements,
    }


def dbos_noop3():
    """DBOS's 3-step no-op workflow, registered under fixed names (queue workers look it up)."""
    from dbos import DBOS

    @DBOS.step(name="a")
    def a():
        return 1

    @DBOS.step(name="b")
    def b():
        return 2

    @DBOS.step(name="c")
    def c():
        return 3

    @DBOS.workflow(name="noop3")
    def noop3():
        a()
        b()
        return c()

    return noop3


def child_dbos(n: int, url: str) -> dict:
    from dbos import DBOS

    from bench.pgcost import Backends, RoundTrips

    DBOS(config={"name": "vfbench", "system_database_url": url, "run_admin_server": False})
    noop3 = dbos_noop3()
    DBOS.launch()
    trips = RoundTrips().install()
    trips.phase = "runner"
    backends = Backends(psycopg_url(db_url("postgres")), dbos_database()).start()
    before = time.process_time()
    started = time.perf_counter()
    for _ in range(n):
        noop3()
    seconds = time.perf_counter() - started
    cpu = {"client": 0.0, "runner": time.process_time() - before, "postgres": backends.used()}
    DBOS.destroy()
    return {
        "seconds": seconds,
        "cpu": cpu,
        "round trips": {"client": 0, "runner": trips.get("runner", "round trips")},
        "statements": {"client": 0, "runner": trips.get("runner", "statements")},
    }


def run_child(system: str, n: int, *, async_commit: bool, per_statement: bool = False) -> dict:
    """`system`: dbos, vitalflow (create + runner's claim) or vitalflow-here (instance_run_here)."""
    database = dbos_database() if system == "dbos" else urlsplit(db_url()).path.lstrip("/")
    before, wal_before = commits(database), wal_written()
    cmd = [sys.executable, __file__, "--child", system, "--n", str(n)]
    if async_commit:
        cmd.append("--async-commit")
    if per_statement:
        cmd.append("--per-statement")
    out = subprocess.run(
        cmd, cwd=ROOT, env=child_env(async_commit=async_commit), capture_output=True, text=True
    )
    if out.returncode != 0:
        raise RuntimeError(f"{system} child failed:\n{out.stderr[-3000:]}")
    time.sleep(0.7)  # the child's backends flush their statistics when they exit
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["commits"] = commits(database) - before
    result["wal"] = [after - was for after, was in zip(wal_written(), wal_before, strict=True)]
    return result


def sequential(system: str, n: int, *, async_commit: bool) -> dict | None:
    try:
        run_child(system, 0, async_commit=async_commit)  # warm-up: schema, caches
        idle = run_child(system, 0, async_commit=async_commit)
        full = run_child(system, n, async_commit=async_commit)
    except (RuntimeError, FileNotFoundError) as exc:
        print(f"  {system}: could not run ({str(exc).strip().splitlines()[-1]})")
        return None
    seconds, steps = full["seconds"], 3 * n
    figures = {
        "workflows/s": n / seconds,
        "steps/s": steps / seconds,
        "commits/step boundary": (full["commits"] - idle["commits"]) / steps,
    }
    print(
        f"  {system:<14} {figures['workflows/s']:8.1f} workflows/s {figures['steps/s']:8.1f} "
        f"steps/s {figures['commits/step boundary']:6.2f} commits/step boundary "
        f"({n} workflows in {seconds:.2f} s)"
    )
    if not n:
        return figures
    cpu = {part: 1000 * used / steps for part, used in full["cpu"].items()}
    figures["machine CPU ms/step"] = cpu["runner"] + cpu["postgres"]
    figures["PostgreSQL CPU ms/step"] = cpu["postgres"]
    trips, statements = full["round trips"], full["statements"]
    # DBOS runs a workflow in its caller: its process CPU is all "runner".
    print(
        f"             CPU per step: client {cpu['client']:.2f} ms (create), runner "
        f"{cpu['runner']:.2f} ms, PostgreSQL {cpu['postgres']:.2f} ms -> runner + PostgreSQL "
        f"{figures['machine CPU ms/step']:.2f} ms"
    )
    print(
        f"             per step: runner {trips['runner'] / steps:.2f} round trips "
        f"({statements['runner'] / steps:.2f} statements), client (create) "
        f"{trips['client'] / steps:.2f} ({statements['client'] / steps:.2f})"
    )
    wal = {
        counter: (full_count - idle_count) / n
        for counter, full_count, idle_count in zip(
            WAL_COUNTERS, full["wal"], idle["wal"], strict=True
        )
    }
    print(
        f"             WAL per workflow: {wal['records']:.1f} records, {wal['bytes']:,.0f} bytes, "
        f"{wal['full-page images']:.2f} full-page images"
    )
    if system.startswith("vitalflow"):
        timed = run_child(system, n // 2, async_commit=async_commit, per_statement=True)
        for name, (count, ns, wall) in timed["per statement"].items():
            print(
                f"             {name:<24} PostgreSQL CPU {ns / count / 1000:4.0f} us, wall "
                f"{1e6 * wall / count:5.0f} us per statement (separate run, {count} statements)"
            )
    return figures


# A 3-step run waits on 5 synchronous commits: its creation, the boundary before each step
# (which also makes the previous step's result durable) and its completion; the claim's commit
# is asynchronous (workflows.engine.claim). instance_run_here waits on 4: its creation is the
# boundary before step 1. Boundaries per run: 3 before steps + completion.
SYNC_COMMITS_PER_RUN = {"vitalflow": 5, "vitalflow-here": 4}
BOUNDARIES_PER_RUN = 4


def commit_wait_cost(on: dict, off: dict, pairs_on: dict, pairs_off: dict) -> None:
    """What waiting for the WAL flush costs (on less off): from the two single runs, wall time
    per step for each system, and per synchronous commit for ours, wall and PostgreSQL CPU (the
    backend does the flush itself; on a VM that is CPU too, bench/README.md); then the same wall
    time from the pairs' medians, steadier than one run each (a single run of DBOS can move by
    more than its commit wait)."""
    print("\nThe commit wait (synchronous_commit on less off, single runs above):")
    for system in on:
        if system not in off:  # it failed to run in one of the two modes
            continue
        wall = 1000 / on[system]["steps/s"] - 1000 / off[system]["steps/s"]
        line = f"  {system:<14} {wall:.2f} ms a step"
        if system in SYNC_COMMITS_PER_RUN:
            per_commit = 3 / SYNC_COMMITS_PER_RUN[system]
            cpu = on[system]["PostgreSQL CPU ms/step"] - off[system]["PostgreSQL CPU ms/step"]
            line += (
                f"; per synchronous commit {wall * per_commit:.3f} ms wall, "
                f"{1000 * cpu * per_commit:.0f} us PostgreSQL CPU"
            )
        print(line)
    if pairs_on and pairs_off:
        walls = [
            f"{system} {1000 / pairs_on[system] - 1000 / pairs_off[system]:.2f} ms"
            for system in pairs_on
        ]
        print(f"  from the pairs' medians, a step: {', '.join(walls)}")


def paired(n: int, pairs: int, *, async_commit: bool) -> dict:
    """instance_run_here and DBOS in alternating children (ABBA), each pair a few seconds
    apart: this machine's speed drifts by tens of percent over minutes, so a ratio of two
    measurements a minute apart is noisier than the median of paired ones. Returns each
    system's median steps/s."""
    ratios, rates = [], {"vitalflow-here": [], "dbos": []}
    for i in range(pairs):
        order = ("vitalflow-here", "dbos") if i % 2 == 0 else ("dbos", "vitalflow-here")
        steps = {}
        for system in order:
            result = run_child(system, n, async_commit=async_commit)
            steps[system] = 3 * n / result["seconds"]
            rates[system].append(steps[system])
        ratios.append(steps["vitalflow-here"] / steps["dbos"])
        print(
            f"  pair {i + 1}: vitalflow-here {steps['vitalflow-here']:7.1f} steps/s, dbos "
            f"{steps['dbos']:6.1f} steps/s -> {ratios[-1]:.2f}x"
        )
    print(
        f"  vitalflow-here/DBOS steps/s over {pairs} alternating pairs: median "
        f"{statistics.median(ratios):.2f}x, range {min(ratios):.2f}-{max(ratios):.2f}x (target 5x)"
    )
    return {system: statistics.median(values) for system, values in rates.items()}


def commit_round_trip(count: int = 300) -> tuple[float, float]:
    """Median wall time (ms) of a one-row INSERT committed in autocommit on the bench database,
    the least a synchronous commit of this server costs, round trip and WAL flush included; and
    the mean CPU (us) its backend spent on one."""
    import psycopg

    from bench.pgcost import on_cpu_ns

    with psycopg.connect(psycopg_url(db_url()), autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_commit (id bigserial PRIMARY KEY)")
        times, backend = [], conn.info.backend_pid
        cpu = on_cpu_ns(backend)
        for _ in range(count):
            started = time.perf_counter()
            conn.execute("INSERT INTO bench_commit DEFAULT VALUES")
            times.append(time.perf_counter() - started)
        cpu = on_cpu_ns(backend) - cpu
        conn.execute("DROP TABLE bench_commit")
    return 1000 * statistics.median(times), cpu / count / 1000


def commit_floor(runs: dict, theirs: dict | None) -> None:
    """How far commit waits alone let a sequential run go, and the CPU per step boundary, for
    each vitalflow variant in `runs` (system -> figures)."""
    commit_ms, commit_cpu_us = commit_round_trip()
    print(
        f"  commit floor: one INSERT + COMMIT round trip {commit_ms:.3f} ms (median of 300; "
        f"PostgreSQL CPU {commit_cpu_us:.0f} us)"
    )
    for system, ours in runs.items():
        run_ms = SYNC_COMMITS_PER_RUN[system] * commit_ms
        ceiling = 3 * 1000 / run_ms
        versus = f" = {ceiling / theirs['steps/s']:.2f}x DBOS's figure" if theirs else ""
        per_boundary = ours["machine CPU ms/step"] * 3 / BOUNDARIES_PER_RUN
        wall = 1000 / ours["steps/s"]
        print(
            f"  {system}: {SYNC_COMMITS_PER_RUN[system]} synchronous commits per 3-step run -> "
            f"at most {ceiling:.0f} steps/s from commit waits alone{versus}; wall per step "
            f"{wall:.2f} ms = commit waits {run_ms / 3:.2f} ms + {wall - run_ms / 3:.2f} ms of "
            f"CPU and round trips; per step boundary ({BOUNDARIES_PER_RUN} per 3-step run): "
            f"runner + PostgreSQL {per_boundary:.2f} ms (target 0.6 ms)"
        )


# -- runner processes ----------------------------------------------------------------------------


def setup_django():
    os.environ.update(child_env())
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    settings.WORKFLOWS_WAKE_TASKS = False
    call_command("migrate", verbosity=0)


def reset_tables() -> None:
    from django.db import connection, connections

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE workflow_log, workflow_event, workflow_step, workflow_task, "
            "workflow_instance, workflow_schedule CASCADE"
        )
    connections.close_all()


def start_runners(
    count: int, *, poll: float, modules: str = UNCAPPED_MODULES, threads: int = 1
) -> list:
    cmd = [sys.executable, "manage.py", "runworkflows", "--poll", str(poll)]
    cmd += ["--concurrency", str(threads)]
    return [
        subprocess.Popen(cmd, cwd=ROOT, env=child_env(modules=modules), stdout=subprocess.DEVNULL)
        for _ in range(count)
    ]


def stop_runners(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        proc.wait(30)


def throughput(
    runners: int,
    total: int,
    workflow: str = "noop3",
    params=None,
    modules=UNCAPPED_MODULES,
    *,
    threads: int = 1,
) -> dict:
    """`params(i)` gives instance i's params (the capped runs: which key it belongs to);
    `modules` is what the runners load (SAMPLE_MODULES: a deployment with capped workflows);
    `threads` per runner process (runworkflows --concurrency)."""
    import psycopg
    from django.db import connections

    from workflows import services
    from workflows.models import WorkflowTask

    reset_tables()
    for start in range(0, total, 500):
        services.instance_create_batch(
            workflow_name=workflow,
            items=[
                {"id": f"t{i}", **({"params": params(i)} if params else {})}
                for i in range(start, min(total, start + 500))
            ],
        )
    WorkflowTask.objects.update(run_at=None)  # held back until the runners are up
    connections.close_all()
    procs = start_runners(runners, poll=0.2, modules=modules, threads=threads)
    database = urlsplit(db_url()).path.lstrip("/")
    monitor = psycopg.connect(psycopg_url(db_url()), autocommit=True)
    meter = CpuMeter(monitor, database, procs)
    meter.wait_connected(2 * runners)  # Django start-up is not what we measure
    before = commits(database)
    meter.start()
    monitor.execute("UPDATE workflow_task SET run_at = now()")
    reads = 3
    started = last_time = time.perf_counter()
    last_done, rates, done = 0, [], 0
    while done < total:
        time.sleep(0.25)
        done = monitor.execute(
            "SELECT count(*) FROM workflow_instance WHERE status = 'complete'"
        ).fetchone()[0]
        meter.sample()
        reads += 2
        now = time.perf_counter()
        if now - last_time >= 2 or done >= total:
            rates.append(f"{(done - last_done) / (now - last_time):.0f}")
            last_done, last_time = done, now
    seconds = time.perf_counter() - started
    runner_cpu, backend_cpu = meter.sample()
    stop_runners(procs)
    monitor.close()
    time.sleep(0.7)
    used = commits(database) - before - reads
    steps = STEPS_PER_WORKFLOW[workflow]
    shape = f"{runners} runner(s)" + (f" x {threads} threads" if threads > 1 else "")
    print(
        f"  {shape}: {total / seconds:7.1f} workflows/s "
        f"{steps * total / seconds:7.1f} steps/s {used / (steps * total):5.2f} commits/step "
        f"boundary ({total} in {seconds:.1f} s)"
    )
    print(
        f"    CPU per workflow: runners {1000 * runner_cpu / total:.2f} ms, their PostgreSQL "
        f"backends {1000 * backend_cpu / total:.2f} ms (per step: "
        f"{1000 * runner_cpu / (steps * total):.2f} ms, {1000 * backend_cpu / (steps * total):.2f} ms)"
    )
    print(f"    claims/s every 2 s: {' '.join(rates)}")
    return {"steps/s": steps * total / seconds}


def child_dbos_worker(url: str) -> None:
    """A DBOS queue worker: launches, registers the bench queue (which starts it draining)
    and prints "ready"; runs until killed."""
    from dbos import DBOS

    DBOS(config={"name": "vfbench", "system_database_url": url, "run_admin_server": False})
    dbos_noop3()
    DBOS.launch()
    DBOS.register_queue(DBOS_QUEUE, polling_interval_sec=DBOS_POLL)
    print("ready", flush=True)
    while True:
        time.sleep(60)


DBOS_QUEUE = "vfbench"
DBOS_POLL = 0.2  # the same poll as the runworkflows processes above


def dbos_queue_throughput(total: int) -> dict | None:
    """DBOS's queue worker (one process) draining `total` noop3 workflows enqueued beforehand
    with DBOSClient; the same figures as `throughput` prints."""
    import psycopg
    from dbos import DBOSClient

    from bench.pgcost import Backends, cpu_seconds

    database = dbos_database()
    url = psycopg_url(db_url(database))
    run_child("dbos", 0, async_commit=False)  # the schema exists before the client connects
    reset_dbos()
    client = DBOSClient(system_database_url=url, application_name="vfbench")
    for _ in range(total):
        client.enqueue({"workflow_name": "noop3", "queue_name": DBOS_QUEUE})
    client.destroy()
    cmd = [sys.executable, __file__, "--child", "dbos-worker"]
    worker = subprocess.Popen(cmd, cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, text=True)
    monitor = psycopg.connect(url, autocommit=True)

    def done() -> int:
        return monitor.execute(
            "SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS'"
        ).fetchone()[0]

    try:
        for line in worker.stdout:  # DBOS may log to stdout first
            if line.strip() == "ready":
                break
        else:
            print("  dbos queue worker: did not start")
            return None
        backends = Backends(psycopg_url(db_url("postgres")), database).start()
        worker_cpu, first = cpu_seconds(worker.pid), done()
        started = time.perf_counter()
        deadline = started + 600
        while (finished := done()) < total and time.perf_counter() < deadline:
            time.sleep(0.25)
        seconds = time.perf_counter() - started
        worker_cpu = cpu_seconds(worker.pid) - worker_cpu
        pg_cpu = backends.used()
    finally:
        worker.kill()
        worker.wait()
        monitor.close()
    ran, steps = finished - first, 3 * (finished - first)
    if not ran:
        print("  dbos queue worker: ran nothing")
        return None
    print(
        f"  dbos queue worker (1 process): {ran / seconds:7.1f} workflows/s "
        f"{steps / seconds:7.1f} steps/s ({ran} in {seconds:.1f} s, polling every {DBOS_POLL} s)"
    )
    print(
        f"    CPU per step: worker {1000 * worker_cpu / steps:.2f} ms, PostgreSQL "
        f"{1000 * pg_cpu / steps:.2f} ms"
    )
    return {"steps/s": steps / seconds}


STEPS_PER_WORKFLOW = {"noop3": 3, "fleet-capped": 2, "fleet-per-user": 1}


class CpuMeter:
    """CPU seconds (/proc/<pid>/stat) of the runner processes and of the database's backends
    from start() on. Backends are listed from pg_stat_activity at each sample; one first seen
    later counts from then, one gone keeps its last reading."""

    def __init__(self, monitor, database: str, procs: list):
        self.monitor, self.database, self.procs = monitor, database, procs
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}

    def backends(self) -> list[int]:
        rows = self.monitor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid() "
            "AND backend_type = 'client backend'",
            [self.database],
        ).fetchall()
        return [pid for (pid,) in rows]

    def wait_connected(self, count: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while len(self.backends()) < count and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(1)

    def start(self) -> None:
        self.first.clear()
        self.last.clear()
        self.sample()

    def sample(self) -> tuple[float, float]:
        """(runner CPU, backend CPU) so far."""
        for pid in [proc.pid for proc in self.procs] + self.backends():
            try:
                used = cpu_seconds(pid)
            except (FileNotFoundError, ProcessLookupError):
                continue
            self.first.setdefault(pid, used)
            self.last[pid] = used
        used = {pid: self.last[pid] - self.first[pid] for pid in self.last}
        runner = sum(used.get(proc.pid, 0.0) for proc in self.procs)
        return runner, sum(used.values()) - runner


def wake_latency(count: int) -> None:
    from django.db import connections

    from workflows import services
    from workflows.models import WorkflowInstance, WorkflowStep

    reset_tables()
    procs = start_runners(2, poll=1.0)
    time.sleep(2)  # let them start
    for i in range(count):
        services.instance_create(workflow_name="sleepy", instance_id=f"w{i}")
        time.sleep(0.02)
    deadline = time.monotonic() + 60
    while WorkflowInstance.objects.exclude(status="complete").exists():
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    stop_runners(procs)
    wake_at = dict(WorkflowStep.objects.filter(name="nap").values_list("instance_id", "wake_at"))
    latencies = sorted(
        output - wake_at[pk].timestamp()
        for pk, output in WorkflowInstance.objects.filter(status="complete").values_list(
            "pk", "output"
        )
    )
    connections.close_all()
    if not latencies:
        print("  no instance completed")
        return
    p50 = latencies[len(latencies) // 2]
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(
        f"  {len(latencies)}/{count} woke: p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
        f"max {latencies[-1] * 1000:.0f} ms (2 runners, --poll 1.0)"
    )


def capped(total: int) -> None:
    """The claim rate of 4 runners when the workflow has a cap: fleet-capped (2 at once) and
    fleet-per-user (1 at once per user, 200 users), after the same 4 runners on noop3 with no
    cap, in a deployment that caps nothing (one-statement claim) and in one that caps another
    workflow (the capped claim: skip full groups, lock and recount a capped row's group)."""
    print(f"  noop3, a deployment that caps nothing, {total} instances:")
    throughput(4, total)
    print(f"  noop3 (no cap), a deployment that caps other workflows, {total} instances:")
    throughput(4, total, modules=SAMPLE_MODULES)
    print(f"  fleet-capped (concurrency=2), {total} instances:")
    throughput(4, total, "fleet-capped", modules=SAMPLE_MODULES)
    print(f"  fleet-per-user (concurrency=1 per user, 200 users), {total} instances:")
    throughput(
        4,
        total,
        "fleet-per-user",
        params=lambda i: {"user": f"u{i % 200}"},
        modules=SAMPLE_MODULES,
    )


def cron_lateness(minutes: int) -> None:
    """Fire lateness = the instance's created_at (and started_at) minus its scheduled time, for
    30 minutely schedules over `minutes` fire times, 2 runners (--poll 1.0)."""
    from datetime import datetime

    from django.db import connections

    from workflows.models import WorkflowInstance

    modules = f"{SAMPLE_MODULES},bench.fleet_workflows"
    reset_tables()
    procs = start_runners(2, poll=1.0, modules=modules)
    # First sight creates the rows (nothing earlier fires); then `minutes` fire times.
    time.sleep(60 * minutes + 75 - time.time() % 60)
    stop_runners(procs)
    created, started = [], []
    rows = WorkflowInstance.objects.filter(workflow_name__startswith="bench-cron-")
    for params, created_at, started_at in rows.values_list("params", "created_at", "started_at"):
        due = datetime.fromisoformat(params["scheduled_time"].replace("Z", "+00:00"))
        created.append((created_at - due).total_seconds())
        if started_at:
            started.append((started_at - due).total_seconds())
    connections.close_all()
    if not created:
        print("  nothing fired")
        return
    for label, values in (("created", created), ("started", started)):
        values.sort()
        p50 = values[len(values) // 2]
        p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
        print(
            f"  {label} after the due time: p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
            f"max {values[-1] * 1000:.0f} ms ({len(values)} fires)"
        )


GC_SQL = [
    # finished 40 days ago: past a 30-day retention
    """INSERT INTO workflow_instance (workflow_name, instance_id, version, status, run_number,
        params, output, error, request_id, priority, created_at, updated_at, started_at,
        completed_at, labels, code_fingerprint)
       SELECT 'noop3', 'gc-' || g, 1, 'complete', 1, NULL, '3', NULL, '', 5, t, t, t, t, '{}', ''
       FROM generate_series(1, %(n)s) g, (SELECT now() - interval '40 days' AS t) ts""",
    """INSERT INTO workflow_step (instance_id, run_number, name, type, status, attempts,
        max_attempts, timeout_ms, next_retry_at, wake_at, wait_event_type, result, error,
        fencing_token, started_at, completed_at)
       SELECT i.id, 1, s.name, 'do', 'complete', 1, 5, 600000, NULL, NULL, '', '1', NULL, 1,
              i.completed_at, i.completed_at
       FROM workflow_instance i, (VALUES ('a'), ('b'), ('c')) s(name)
       WHERE i.instance_id LIKE 'gc-%%'""",
    """INSERT INTO workflow_log (instance_id, run_number, level, category, message, data,
        step_name, attempt, is_replay, request_id, created_at)
       SELECT i.id, 1, 'info', 'system', s.m, NULL, '', NULL, false, '', i.completed_at
       FROM workflow_instance i, (VALUES ('started'), ('complete')) s(m)
       WHERE i.instance_id LIKE 'gc-%%'""",
]


def gc_while_running(finished: int, backlog: int) -> None:
    """GC of `finished` instances (3 steps, 2 log lines each) finished 40 days ago, with a
    30-day retention, while 2 runners work through `backlog` new noop3 instances."""
    import psycopg
    from django.conf import settings
    from django.db import connection, connections

    from workflows import gc, runtime, services
    from workflows.models import WorkflowTask

    reset_tables()
    with connection.cursor() as cursor:
        for sql in GC_SQL:
            cursor.execute(sql, {"n": finished})
        cursor.execute("ANALYZE workflow_instance, workflow_step, workflow_log")
    for start in range(0, backlog, 500):
        services.instance_create_batch(
            workflow_name="noop3",
            items=[{"id": f"b{i}"} for i in range(start, min(backlog, start + 500))],
        )
    WorkflowTask.objects.update(run_at=None)  # held back until the runners are up
    settings.WORKFLOWS_RETENTION = {"complete": "30 days"}
    target = gc.targets(runtime.now())
    plan = gc.expired(next(t for t in target if t.workflow_name == "noop3"))
    with connection.cursor() as cursor:
        query, params = (
            plan.order_by("completed_at").values_list("id")[:500].query.sql_with_params()
        )
        cursor.execute("EXPLAIN " + query, params)
        print(f"  selection plan: {' / '.join(row[0].strip() for row in cursor.fetchall()[:2])}")
    connections.close_all()

    procs = start_runners(2, poll=0.2)
    time.sleep(5)
    monitor = psycopg.connect(psycopg_url(db_url()), autocommit=True)
    monitor.execute("UPDATE workflow_task SET run_at = now()")

    def done() -> int:
        return monitor.execute(
            "SELECT count(*) FROM workflow_instance WHERE status = 'complete' "
            "AND instance_id LIKE 'b%'"
        ).fetchone()[0]

    time.sleep(2)  # warm
    before, began = done(), time.perf_counter()
    time.sleep(8)
    baseline = (done() - before) / (time.perf_counter() - began)
    before, began = done(), time.perf_counter()
    report = gc.gc_run()
    seconds = time.perf_counter() - began
    during = (done() - before) / seconds
    left = done()
    stop_runners(procs)
    monitor.close()
    rows = sum(report.rows.values())
    print(
        f"  GC: {report.rows['instances']} instances, {rows} rows in {seconds:.1f} s: "
        f"{report.rows['instances'] / seconds:,.0f} instances/s, {rows / seconds:,.0f} rows/s "
        f"(batches of {settings.WORKFLOWS_GC_BATCH_SIZE})"
    )
    print(
        f"  runners (2): {baseline:.0f} workflows/s before the GC, {during:.0f} workflows/s "
        f"during it{'' if left < backlog else ' (backlog ran out: raise it)'}"
    )
    connections.close_all()


# -- wake latency and idle CPU under `make run` -------------------------------------------------


def makerun_database() -> str:
    """The bench database's name + _makerun (dropped and created afresh by each run)."""
    return urlsplit(db_url()).path.lstrip("/") + "_makerun"


MAKERUN_MODULES = "demo.examples,tests.workflows.sample_workflows"
MAKERUN_KINDS = {
    "sleep": ("wake-sleep", "sleep"),
    "retry": ("wake-retry", "retry"),
    "timeout": ("wake-timeout", "event timeout"),
    "event": ("wake-event", "event"),
}


def makerun(db: str, per_kind: int, idle: float) -> None:
    """One child per database: Django is set up once per process."""
    cmd = [sys.executable, __file__, "--child", "makerun", "--db", db, "--n", str(per_kind)]
    cmd += ["--idle", str(idle)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    print(out.stdout.rstrip())
    if out.returncode != 0:
        print(f"  {db}: failed\n{out.stderr[-3000:]}")


def makerun_env(db: str, var_dir: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(
        VAR_DIR=var_dir,
        WORKFLOWS_MODULES=MAKERUN_MODULES,
        TERRA_API_KEY="",  # demo mode, as a fresh checkout runs
        LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="config.settings",
        PYTHONPATH=str(ROOT),
    )
    if db == "postgres":
        with admin_connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{makerun_database()}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{makerun_database()}"')
        env["DATABASE_URL"] = db_url(makerun_database())
    return env


def start_make_run(env: dict) -> tuple[subprocess.Popen, dict]:
    """manage.py rundemo --no-feed on a free port; returns it and its children's pids by name
    once the banner is printed (migrations done, example instances created)."""
    import re
    import socket
    import threading

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    demo = subprocess.Popen(
        [sys.executable, "manage.py", "rundemo", "--no-feed", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    pids = {}
    for line in demo.stdout:
        if started := re.search(r"rundemo: (\w+): started \(pid (\d+)\)", line):
            pids[started[1]] = int(started[2])
        if "vitalflow is running" in line:
            break
    else:
        raise RuntimeError("make run exited before its banner")

    def drain():  # keep reading, or the children block on a full pipe
        for _ in demo.stdout:
            pass

    threading.Thread(target=drain, daemon=True).start()
    return demo, pids


def wait_until(predicate, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


def percentiles(values: list[float]) -> str:
    values = sorted(values)
    p50 = values[len(values) // 2]
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return f"p50 {p50 * 1000:5.0f} ms  p99 {p99 * 1000:5.0f} ms  max {values[-1] * 1000:5.0f} ms"


def wake_phase(kind: str, per_kind: int, var_dir: str) -> list[float]:
    """Create `per_kind` instances 50 ms apart (timers of 1-2 s, so they fall due while others
    are still being created), wait for them all; their wake latencies in seconds."""
    from workflows import services
    from workflows.models import WorkflowInstance, WorkflowStep, WorkflowTask

    name = MAKERUN_KINDS[kind][0]
    ids = [f"{kind}-{i}" for i in range(per_kind)]
    for i, instance_id in enumerate(ids):
        params = {"ms": 1000 + (i * 137) % 1000, "marker": f"{var_dir}/{instance_id}"}
        services.instance_create(workflow_name=name, instance_id=instance_id, params=params)
        time.sleep(0.05)
    rows = WorkflowInstance.objects.filter(instance_id__in=ids)
    sent = {}
    if kind == "event":
        waiting = WorkflowTask.objects.filter(
            instance__in=rows, wait_event_type="go", locked_until__isnull=True
        )
        wait_until(lambda: waiting.count() == per_kind, "instances waiting for their event")
        for instance in rows:
            services.instance_send_event(instance=instance, type="go")
            sent[instance.instance_id] = time.time()  # committed: runners may see it now
            time.sleep(0.05)
    wait_until(lambda: rows.filter(status="complete").count() == per_kind, f"{kind} instances")
    woke = dict(rows.values_list("instance_id", "output"))
    if kind == "event":
        due = sent
    elif kind == "retry":  # the first attempt wrote when it failed; the retry is due 1 s later
        due = {i: float(Path(f"{var_dir}/{i}").read_text()) + 1.0 for i in ids}
    else:
        stored = WorkflowStep.objects.filter(
            instance__in=rows, name="nap" if kind == "sleep" else "never"
        ).values_list("instance__instance_id", "wake_at")
        due = {i: at.timestamp() for i, at in stored}
    return [woke[i] - due[i] for i in ids]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def child_makerun(db: str, per_kind: int, idle: float) -> None:
    import tempfile

    var_dir = tempfile.mkdtemp(prefix="vf-makerun-")
    env = makerun_env(db, var_dir)
    os.environ.clear()
    os.environ.update(env)
    demo, pids = start_make_run(env)
    try:
        import django

        django.setup()
        from workflows import services
        from workflows.engine import next_due_at
        from workflows.models import TERMINAL_STATUSES, WorkflowInstance

        for kind, (_, label) in MAKERUN_KINDS.items():
            latencies = wake_phase(kind, per_kind, var_dir)
            print(f"  {db:<8} {label:<14} {percentiles(latencies)}  ({per_kind} instances)")
        # Idle: nothing due in the window (the demo's own instances are ended first).
        for instance in WorkflowInstance.objects.exclude(status__in=TERMINAL_STATUSES):
            services.instance_terminate(instance=instance)
        time.sleep(3)
        due = next_due_at()
        runner = pids["runner"]
        before, started = cpu_seconds(runner), time.monotonic()
        time.sleep(idle)
        used, seconds = cpu_seconds(runner) - before, time.monotonic() - started
        note = "nothing due" if due is None else f"next due {due.isoformat()}"
        print(
            f"  {db:<8} idle runner    {100 * used / seconds:.2f}% of a core over {seconds:.0f} s "
            f"({used:.2f} s CPU, pid {runner}; {note})"
        )
    finally:
        demo.send_signal(signal.SIGTERM)
        try:
            demo.wait(60)
        except subprocess.TimeoutExpired:
            demo.kill()


# -- faults --------------------------------------------------------------------------------------


def start_runner(*, env: dict | None = None, concurrency: int = 1, lease: int = 2):
    cmd = [sys.executable, "manage.py", "runworkflows", "--poll", "0.1"]
    cmd += ["--concurrency", str(concurrency)]
    full_env = {**child_env(), "WORKFLOWS_LEASE_SECONDS": str(lease), **(env or {})}
    return subprocess.Popen(
        cmd, cwd=ROOT, env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def wait_settled(timeout: float) -> None:
    from workflows.models import WorkflowInstance

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not WorkflowInstance.objects.filter(status__in=["active", "waiting"]).exists():
            return
        time.sleep(0.5)


def backend_killer() -> None:
    """100 instances x 5 steps of 100 ms, 2 runners x 2 threads; every runner backend terminated
    every 2 s."""
    import threading

    import psycopg
    from django.db import connection, connections
    from django.db.models import Count

    from workflows import services
    from workflows.models import WorkflowInstance, WorkflowStep

    reset_tables()
    services.instance_create_batch(
        workflow_name="sample-steps",
        items=[{"id": f"k{n}", "params": {"steps": 5, "sleep_ms": 100}} for n in range(100)],
    )
    connection.ensure_connection()
    spare = connection.connection.info.backend_pid
    stop, kills = threading.Event(), [0]

    def killer():
        with psycopg.connect(psycopg_url(db_url()), autocommit=True) as conn:
            while not stop.wait(2):
                rows = conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND pid <> %s AND backend_type = 'client backend'",
                    [spare],
                ).fetchall()
                kills[0] += sum(1 for (ok,) in rows if ok)

    thread = threading.Thread(target=killer, daemon=True)
    procs = [start_runner(concurrency=2, lease=3) for _ in range(2)]
    started = time.perf_counter()
    thread.start()
    wait_settled(240)
    seconds = time.perf_counter() - started
    stop.set()
    thread.join()
    stop_runners(procs)
    statuses = dict(
        WorkflowInstance.objects.values_list("status").annotate(n=Count("id")).order_by()
    )
    steps = WorkflowStep.objects.filter(status="complete").count()
    connections.close_all()
    print(
        f"  backend killer: {statuses.get('errored', 0)} errored, "
        f"{statuses.get('complete', 0)}/100 complete, {steps}/500 steps stored, "
        f"{kills[0]} backends terminated in {seconds:.0f} s"
    )


def lease_steals(skew: int) -> None:
    """6 instances of one 10 s step (lease 2 s, renewed); a normal runner holds them, a runner
    `skew` seconds off challenges (for a slow one the roles swap: its leases look expired to
    the normal runner). A steal = a step that ran twice."""
    import glob
    import tempfile
    from collections import Counter

    from django.db import connections

    from workflows import services

    libs = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
    if not libs:
        print(f"  lease steals at {skew:+d} s: libfaketime missing (apt-get install faketime)")
        return
    skewed = {"LD_PRELOAD": libs[0], "FAKETIME": f"{skew:+d}", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    reset_tables()
    trace = Path(tempfile.mkdtemp()) / "trace"
    holder_env, challenger_env = ({}, skewed) if skew > 0 else (skewed, {})
    holder = start_runner(env=holder_env, concurrency=6)
    services.instance_create_batch(
        workflow_name="fault-long-step",
        items=[{"id": f"l{n}", "params": {"seconds": 10, "trace": str(trace)}} for n in range(6)],
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (
        not trace.exists() or len(trace.read_text().splitlines()) < 6
    ):
        time.sleep(0.1)
    challenger = start_runner(env=challenger_env, concurrency=6)
    wait_settled(120)
    stop_runners([holder, challenger])
    runs = Counter(line.split()[0] for line in trace.read_text().splitlines())
    steals = sum(n - 1 for n in runs.values())
    connections.close_all()
    print(f"  lease steals at {skew:+d} s skew: {steals} extra executions of {len(runs)} steps")


def guard_cost(n: int = 200_000) -> None:
    """Runner CPU the storage-fault handling adds to each step boundary when nothing fails: the
    guarded() block around the commit and the two fault-hook checks (persist.persist_boundary),
    timed in this process with no database. Compare with the runner CPU per workflow of the
    throughput rows (3 step boundaries each)."""
    from workflows.engine import storage_faults

    started = time.process_time()
    for _ in range(n):
        with storage_faults.guarded():
            storage_faults.inject("boundary_commit_before")
            storage_faults.inject("boundary_commit_after")
    per_boundary = (time.process_time() - started) / n
    print(f"  fault handling per step boundary: {per_boundary * 1e6:.2f} us of runner CPU")


def faults() -> None:
    print("\nFaults (docs/workflows/faults.md):")
    guard_cost()
    backend_killer()
    for skew in (600, -600):
        lease_steals(skew)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--only",
        choices=["sequential", "throughput", "wake", "makerun", "capped", "cron", "gc"],
    )
    parser.add_argument("--db", choices=["sqlite", "postgres"], help="makerun: one database")
    parser.add_argument("--idle", type=float, default=45.0, help="makerun: idle CPU window, s")
    parser.add_argument("--faults", action="store_true", help="fault figures only")
    parser.add_argument(
        "--pairs", type=int, default=4, help="sequential: alternating vitalflow-here/DBOS pairs"
    )
    parser.add_argument(
        "--child",
        choices=["vitalflow", "vitalflow-here", "dbos", "dbos-worker", "makerun"],
        help=argparse.SUPPRESS,
    )
    parser.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--async-commit", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--per-statement", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child in ("vitalflow", "vitalflow-here"):
        sys.path.insert(0, str(ROOT))
        here = args.child == "vitalflow-here"
        print(json.dumps(child_vitalflow(args.n, per_statement=args.per_statement, here=here)))
        return
    if args.child == "makerun":
        sys.path.insert(0, str(ROOT))
        child_makerun(args.db, args.n, args.idle)
        return
    if args.only == "makerun":
        per_kind = 20 if args.quick else 50
        print(f"\nWake latency under `make run` (web + qcluster + runner), {per_kind} per kind:")
        for db in [args.db] if args.db else ["sqlite", "postgres"]:
            makerun(db, per_kind, args.idle)
        return
    if args.child == "dbos":
        url = psycopg_url(db_url(dbos_database(), async_commit=args.async_commit))
        print(json.dumps(child_dbos(args.n, url)))
        return
    if args.child == "dbos-worker":
        child_dbos_worker(psycopg_url(db_url(dbos_database())))
        return

    sequential_n = 200 if args.quick else 500
    total = 500 if args.quick else 2000
    ensure_database(urlsplit(db_url()).path.lstrip("/"))
    ensure_database(dbos_database())
    setup_django()
    reset_tables()
    try:
        import dbos  # noqa: F401

        has_dbos = True
    except ImportError:
        has_dbos = False
        print("DBOS Transact is not installed (pip install dbos): vitalflow figures only.")

    if args.faults:
        faults()
        return
    measured = {}  # async_commit -> {system: figures}, DBOS's included
    pair_medians = {}  # async_commit -> {system: median steps/s of the pairs}
    for async_commit in (False, True) if args.only in (None, "sequential") else ():
        reset_tables()
        reset_dbos()
        mode = "off" if async_commit else "on (server default)"
        print(f"\nSequential 3-step no-op workflows, synchronous_commit={mode}:")
        # vitalflow: instance_create, then a runner's claim; vitalflow-here: instance_run_here,
        # like for like with DBOS, whose workflow called directly runs in its caller.
        runs = {
            system: sequential(system, sequential_n, async_commit=async_commit)
            for system in ("vitalflow", "vitalflow-here")
        }
        runs = {system: figures for system, figures in runs.items() if figures}
        theirs = sequential("dbos", sequential_n, async_commit=async_commit) if has_dbos else None
        for system, ours in runs.items() if theirs else ():
            print(
                f"  {system}/DBOS steps/s: {ours['steps/s'] / theirs['steps/s']:.2f}x (target 5x); "
                f"{system} runner + PostgreSQL CPU per step {ours['machine CPU ms/step']:.2f} ms, "
                f"DBOS {theirs['machine CPU ms/step']:.2f} ms"
            )
        measured[async_commit] = dict(runs, dbos=theirs) if theirs else runs
        if runs and not async_commit:
            commit_floor(runs, theirs)
        if has_dbos and args.pairs:
            print(f"  Alternating pairs of {sequential_n} workflows each:")
            pair_medians[async_commit] = paired(sequential_n, args.pairs, async_commit=async_commit)
    if len(measured) == 2:
        commit_wait_cost(
            measured[False], measured[True], pair_medians.get(False), pair_medians.get(True)
        )
    if args.only in (None, "throughput"):
        print(f"\nThroughput over {total} instances (noop3), runworkflows processes:")
        figures = {(runners, 1): throughput(runners, total) for runners in (1, 2, 4)}
        figures[(2, 4)] = throughput(2, total, threads=4)
        theirs = dbos_queue_throughput(total) if has_dbos else None
        for runners, threads in ((2, 1), (2, 4)) if theirs else ():
            ratio = figures[(runners, threads)]["steps/s"] / theirs["steps/s"]
            print(
                f"  {runners} runners x {threads} thread(s) / DBOS queue worker steps/s: "
                f"{ratio:.2f}x (target 5x)"
            )
    if args.only in (None, "wake"):
        print("\nWake latency after a 1 s sleep:")
        wake_latency(100 if args.quick else 200)
    if args.only in (None, "capped"):
        print("\nClaim rate with a concurrency cap, 4 runworkflows processes:")
        capped(total)
    if args.only in (None, "cron"):
        print("\nCron fire lateness (30 minutely schedules, 2 runners):")
        cron_lateness(1 if args.quick else 3)
    if args.only in (None, "gc"):
        finished = 20_000 if args.quick else 100_000
        print(f"\nGC of {finished:,} finished instances while runners keep running:")
        gc_while_running(finished, backlog=5_000 if args.quick else 20_000)


if __name__ == "__main__":
    main()
