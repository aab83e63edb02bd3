"""Worker liveness: every long-running process records a heartbeat and its last progress, the
console and /readyz read them.

- A qcluster beats from a thread in each of its worker processes (started on django-q2's
  post_spawn signal, like ingest's due poller), all writing the cluster's one row (keyed by
  the pid of the `qcluster` process): a cluster frozen or dead stops beating as a whole.
- `runworkflows` beats from a thread of its own and removes its row when it stops cleanly.
- Work code calls progress_mark() when it has finished something (the consumer a row, the
  runner a step boundary); each beat carries the latest mark of its process (a cluster's row:
  of any of its workers). A beat is a thread's doing, so it says the process is there, not that
  it works: a process that beats, has work waiting (what work is, each app registers with
  work_register) and finished nothing for WORKER_STUCK_SECONDS is stuck.
- A process that beats also bounds its database round trips (ops.dbwatch).

A row is stale once it missed two beats (2 × HEARTBEAT_SECONDS) and leaves the live list after
HEARTBEAT_FORGET_SECONDS; beats delete such forgotten rows now and then. Every time is the
database's clock (Now()), so hosts whose clocks disagree still agree on what is stale.
"""

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from importlib import metadata

from django.conf import settings
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.db.models import DateTimeField, ExpressionWrapper, F, Value
from django.db.models.functions import Coalesce, Greatest, Now

from ops import dbwatch
from ops.models import WorkerHeartbeat

log = logging.getLogger(__name__)

CLUSTER = "cluster"  # a django-q2 qcluster: the ingest consumer, schedules, workflow wake tasks
RUNNER = "runner"  # a `manage.py runworkflows` process
KINDS = (CLUSTER, RUNNER)
FORGET_EVERY_BEATS = 20


def heartbeat_seconds() -> float:
    return float(getattr(settings, "HEARTBEAT_SECONDS", 15))


def stale_after() -> timedelta:
    return timedelta(seconds=2 * heartbeat_seconds())


def forget_after() -> timedelta:
    return timedelta(seconds=float(getattr(settings, "HEARTBEAT_FORGET_SECONDS", 3600)))


def stuck_after() -> timedelta:
    return timedelta(seconds=float(getattr(settings, "WORKER_STUCK_SECONDS", 120)))


# -- progress -------------------------------------------------------------------------------------

_last_progress: float | None = None  # time.monotonic() of this process's last finished work


def progress_mark() -> None:
    """This process has just finished a piece of work (a row, a step boundary): its next beat
    says so. A variable write: cheap enough for every row."""
    global _last_progress
    _last_progress = time.monotonic()


def progress_age() -> float | None:
    """Seconds since this process last finished work; None when it has not yet."""
    return None if _last_progress is None else time.monotonic() - _last_progress


_work: dict[str, dict[str, Callable[[], datetime | None]]] = {}


def work_register(kind: str, waiting_since: Callable[[], datetime | None]) -> None:
    """An app names work that `kind` of process takes: `waiting_since()` answers since when the
    oldest piece of it has been waiting to be taken (None: nothing waits). Called from
    AppConfig.ready(), like the schedules (ops knows no app)."""
    _work.setdefault(kind, {})[f"{waiting_since.__module__}.{waiting_since.__qualname__}"] = (
        waiting_since
    )


def work_waiting_since(kind: str) -> datetime | None:
    """The earliest answer of the work registered for `kind` (a failing reader counts as none:
    the list of workers must still show)."""
    found = []
    for name, waiting_since in _work.get(kind, {}).items():
        try:
            found.append(waiting_since())
        except Exception:
            log.warning("liveness: reading %s failed", name, exc_info=True)
    found = [at for at in found if at is not None]
    return min(found) if found else None


def stuck_for(
    *, now: datetime, last_progress: datetime | None, waiting_since: datetime | None
) -> timedelta | None:
    """How long a beating process has been stuck: work has waited since `waiting_since` and it
    finished nothing after that (or after its last progress, when later) for longer than
    WORKER_STUCK_SECONDS; None when it is not. A process kept idle because another one takes
    the work first is not stuck: the work does not wait."""
    if waiting_since is None:
        return None
    since = waiting_since if last_progress is None else max(waiting_since, last_progress)
    stuck = now - since
    return stuck if stuck > stuck_after() else None


def software_version() -> str:
    try:
        return metadata.version("vitalflow")
    except metadata.PackageNotFoundError:
        return "unknown"


def heartbeat_beat(
    *,
    kind: str,
    pid: int,
    host: str | None = None,
    forget: bool = False,
    progress_ago: float | None = None,
) -> None:
    """Upsert this process's row with last_seen_at = the database's now and, when it has
    finished work `progress_ago` seconds ago, last_progress_at = the database's now minus that
    (never moved back: a cluster's row keeps the latest of its workers)."""
    host = host or socket.gethostname()
    rows = WorkerHeartbeat.objects.filter(kind=kind, host=host, pid=pid)
    progress = None
    beat = {"last_seen_at": Now(), "version": software_version()}
    if progress_ago is not None:
        progress = ExpressionWrapper(
            Now() - Value(timedelta(seconds=progress_ago)), output_field=DateTimeField()
        )
        beat["last_progress_at"] = Greatest(Coalesce(F("last_progress_at"), progress), progress)
    if not rows.update(**beat):
        try:
            with transaction.atomic():
                WorkerHeartbeat.objects.create(
                    kind=kind,
                    host=host,
                    pid=pid,
                    version=software_version(),
                    started_at=Now(),
                    last_seen_at=Now(),
                    last_progress_at=progress,
                )
        except IntegrityError:  # another worker process of the same cluster was first
            rows.update(**beat)
    if forget:
        WorkerHeartbeat.objects.filter(last_seen_at__lt=Now() - forget_after()).delete()


def heartbeat_remove(*, kind: str, pid: int, host: str | None = None) -> None:
    """A clean stop: the process leaves the list instead of turning stale."""
    WorkerHeartbeat.objects.filter(kind=kind, host=host or socket.gethostname(), pid=pid).delete()


def workers_live() -> list[dict]:
    """Processes seen within HEARTBEAT_FORGET_SECONDS, newest beat first, each with `stale`
    (missed two beats) and `age_seconds` since its last beat, `last_progress` and
    `progress_age_seconds` (None before its first finished work), `stuck` and `stuck_seconds`
    (beats, work waits, nothing finished: see stuck_for), and `state` (live | stuck | stale), by
    the database's clock."""
    rows = list(
        WorkerHeartbeat.objects.filter(last_seen_at__gte=Now() - forget_after())
        .annotate(db_now=Now())
        .order_by("kind", "-last_seen_at")
    )
    limit = stale_after()
    waiting = {kind: work_waiting_since(kind) for kind in {row.kind for row in rows}}
    workers = []
    for row in rows:
        stale = row.db_now - row.last_seen_at > limit
        stuck = None
        if not stale:
            stuck = stuck_for(
                now=row.db_now, last_progress=row.last_progress_at, waiting_since=waiting[row.kind]
            )
        progress = row.last_progress_at
        workers.append(
            {
                "kind": row.kind,
                "host": row.host,
                "pid": row.pid,
                "version": row.version,
                "started": row.started_at,
                "last_seen": row.last_seen_at,
                "age_seconds": _seconds(row.db_now - row.last_seen_at),
                "stale": stale,
                "last_progress": progress,
                "progress_age_seconds": _seconds(row.db_now - progress) if progress else None,
                "stuck": stuck is not None,
                "stuck_seconds": _seconds(stuck) if stuck is not None else None,
                "state": "stale" if stale else "stuck" if stuck is not None else "live",
            }
        )
    return workers


def _seconds(delta: timedelta) -> float:
    return max(delta.total_seconds(), 0.0)


def live_count_by_kind(workers: list[dict]) -> dict[str, int]:
    """Processes that beat (stuck ones too: they are there, which is what stale tells)."""
    return _count(worker for worker in workers if not worker["stale"])


def stuck_count_by_kind(workers: list[dict]) -> dict[str, int]:
    return _count(worker for worker in workers if worker["stuck"])


def _count(workers) -> dict[str, int]:
    counts = dict.fromkeys(KINDS, 0)
    for worker in workers:
        counts[worker["kind"]] = counts.get(worker["kind"], 0) + 1
    return counts


class HeartbeatThread(threading.Thread):
    """Beats every HEARTBEAT_SECONDS until stop(); a failed beat (database down) is logged and
    the next one tries again on a fresh connection."""

    def __init__(self, *, kind: str, pid: int):
        super().__init__(name=f"heartbeat-{kind}", daemon=True)
        self.kind, self.pid = kind, pid
        self.stopping = threading.Event()

    def run(self) -> None:
        beats = 0
        while not self.stopping.is_set():
            try:
                heartbeat_beat(
                    kind=self.kind,
                    pid=self.pid,
                    forget=beats % FORGET_EVERY_BEATS == 0,
                    progress_ago=progress_age(),
                )
                beats += 1
            except Exception:
                log.warning("heartbeat %s: beat failed", self.kind, exc_info=True)
                close_old_connections()
                connection.close()
            self.stopping.wait(heartbeat_seconds())
        connection.close()

    def stop(self) -> None:
        self.stopping.set()


def heartbeat_start(*, kind: str, pid: int | None = None) -> HeartbeatThread | None:
    """Start beating for this process (HEARTBEAT_SECONDS = 0 turns heartbeats off). A process
    that beats is a long-running worker: its database round trips are bounded from now on
    (ops.dbwatch, DB_ROUND_TRIP_SECONDS), whether it beats or not."""
    dbwatch.watch_start()
    if heartbeat_seconds() <= 0:
        return None
    thread = HeartbeatThread(kind=kind, pid=pid or os.getpid())
    thread.start()
    return thread


def _cluster_pid() -> int:
    """The `qcluster` process's pid, seen from one of its workers: worker → sentinel → qcluster.
    Every worker of one cluster then writes the same row."""
    sentinel = os.getppid()
    try:
        with open(f"/proc/{sentinel}/stat") as stat:
            # "pid (comm) state ppid …"; comm may hold spaces, so split after its ")".
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return sentinel


_cluster_lock = threading.Lock()
_cluster_thread: HeartbeatThread | None = None


def cluster_heartbeat_start(**_signal_kwargs) -> None:
    """post_spawn receiver: one heartbeat thread per qcluster worker process."""
    from django_q.conf import Conf

    global _cluster_thread
    if Conf.SYNC:  # sync mode runs "workers" inline in the caller's process (tests)
        return
    with _cluster_lock:
        if _cluster_thread is None or not _cluster_thread.is_alive():
            _cluster_thread = heartbeat_start(kind=CLUSTER, pid=_cluster_pid())
