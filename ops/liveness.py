"""Worker liveness: every long-running process records a heartbeat, the console and /readyz
read them.

- A qcluster beats from a thread in each of its worker processes (started on django-q2's
  post_spawn signal, like ingest's due poller), all writing the cluster's one row (keyed by
  the pid of the `qcluster` process): a cluster frozen or dead stops beating as a whole.
- `runworkflows` beats from a thread of its own and removes its row when it stops cleanly.

A row is stale once it missed two beats (2 × HEARTBEAT_SECONDS) and leaves the live list after
HEARTBEAT_FORGET_SECONDS; beats delete such forgotten rows now and then. Every time is the
database's clock (Now()), so hosts whose clocks disagree still agree on what is stale.
"""

import logging
import os
import socket
import threading
from datetime import timedelta
from importlib import metadata

from django.conf import settings
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.db.models.functions import Now

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


def software_version() -> str:
    try:
        return metadata.version("vitalflow")
    except metadata.PackageNotFoundError:
        return "unknown"


def heartbeat_beat(*, kind: str, pid: int, host: str | None = None, forget: bool = False) -> None:
    """Upsert this process's row with last_seen_at = the database's now."""
    host = host or socket.gethostname()
    rows = WorkerHeartbeat.objects.filter(kind=kind, host=host, pid=pid)
    if not rows.update(last_seen_at=Now(), version=software_version()):
        try:
            with transaction.atomic():
                WorkerHeartbeat.objects.create(
                    kind=kind,
                    host=host,
                    pid=pid,
                    version=software_version(),
                    started_at=Now(),
                    last_seen_at=Now(),
                )
        except IntegrityError:  # another worker process of the same cluster was first
            rows.update(last_seen_at=Now())
    if forget:
        WorkerHeartbeat.objects.filter(last_seen_at__lt=Now() - forget_after()).delete()


def heartbeat_remove(*, kind: str, pid: int, host: str | None = None) -> None:
    """A clean stop: the process leaves the list instead of turning stale."""
    WorkerHeartbeat.objects.filter(kind=kind, host=host or socket.gethostname(), pid=pid).delete()


def workers_live() -> list[dict]:
    """Processes seen within HEARTBEAT_FORGET_SECONDS, newest beat first, each with `stale`
    (missed two beats) and `age_seconds` since its last beat, by the database's clock."""
    rows = (
        WorkerHeartbeat.objects.filter(last_seen_at__gte=Now() - forget_after())
        .annotate(db_now=Now())
        .order_by("kind", "-last_seen_at")
    )
    limit = stale_after()
    return [
        {
            "kind": row.kind,
            "host": row.host,
            "pid": row.pid,
            "version": row.version,
            "started": row.started_at,
            "last_seen": row.last_seen_at,
            "age_seconds": max((row.db_now - row.last_seen_at).total_seconds(), 0.0),
            "stale": row.db_now - row.last_seen_at > limit,
        }
        for row in rows
    ]


def live_count_by_kind(workers: list[dict]) -> dict[str, int]:
    counts = dict.fromkeys(KINDS, 0)
    for worker in workers:
        if not worker["stale"]:
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
                heartbeat_beat(kind=self.kind, pid=self.pid, forget=beats % FORGET_EVERY_BEATS == 0)
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
    """Start beating for this process (HEARTBEAT_SECONDS = 0 turns heartbeats off)."""
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
