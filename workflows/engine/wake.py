"""Waking idle runners on time without hot polling.

PostgreSQL: whatever makes a task runnable or due sooner sends `NOTIFY workflows_wake` in its
own transaction (services through schedule_wake; the runner when it commits a suspension
or gives a task back), so the notification is delivered on commit and never for rolled-back
work. Each `runworkflows` process keeps one extra connection that LISTENs; its idle worker
threads sleep until a notification, the next due time they read from the database, or the idle
cap, whichever comes first. The cap only bounds what no notification announces (a crashed
runner's lease running out).

SQLite has no notifications: idle runners poll the next due time every POLL_SECONDS (a few
indexed reads of a local file). So does a PostgreSQL runner while its listener reconnects.
"""

import contextlib
import logging
import threading

from django.conf import settings
from django.db import connections, transaction

from workflows.engine.store import LISTEN, NOTIFY

log = logging.getLogger(__name__)

IDLE_CAP_SECONDS = 10.0  # listening: a notification or the next due time wakes us first
POLL_SECONDS = 0.5  # not listening: due timers and new work are seen within this
LISTEN_TIMEOUT = 5.0  # the listener checks for a stop this often
RECONNECT_MAX_SECONDS = 10.0


def listens(using: str = "default") -> bool:
    return connections[using].vendor == "postgresql"


def notify(using: str = "default") -> None:
    """Announce runnable work: in the current transaction (delivered at commit) on PostgreSQL;
    nothing on SQLite, whose runners poll."""
    if listens(using):
        with connections[using].cursor() as cursor:
            cursor.execute(NOTIFY)


def schedule_wake(*, notified: bool = False) -> None:
    """Work became runnable: NOTIFY idle runners (PostgreSQL, delivered at commit) and enqueue
    one django-q2 wake task (workflows.tasks.wake) after the current transaction commits (never
    for rolled-back work). `notified`: the caller's own statement called pg_notify."""
    if not notified:
        notify()
    if wake_enabled() and not _wake_pending():
        transaction.on_commit(_enqueue_wake)


def _wake_pending() -> bool:
    """One wake task per transaction is enough (a batch creates many instances in one)."""
    pending = connections["default"].run_on_commit
    return any(entry[1] is _enqueue_wake for entry in pending)


def wake_enabled() -> bool:
    """WORKFLOWS_WAKE_TASKS=False (tests, benches) keeps services from enqueueing wake tasks."""
    return bool(getattr(settings, "WORKFLOWS_WAKE_TASKS", True))


def _enqueue_wake() -> None:
    from django_q.tasks import async_task  # django-q2 only where a wake task is sent

    try:
        async_task("workflows.tasks.wake", q_options={"task_name": "workflows.wake"})
    except Exception:  # the sweep and runworkflows still pick the work up
        log.exception("could not enqueue a workflows wake task")


class Waker:
    """What idle runner threads of one process wait on.

    A thread reads `generation` before it looks for work and passes it to `wait`, so a
    notification that arrives in between is never slept through."""

    def __init__(self, *, using: str = "default"):
        self.using = using
        self.generation = 0
        self.listening = False
        self._cond = threading.Condition()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "Waker":
        if listens(self.using):
            self._thread = threading.Thread(target=self._listen, daemon=True, name="wf-listen")
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self.wake()

    def idle_cap(self, poll: float | None) -> float:
        """The longest idle sleep: --poll when given, else by whether notifications arrive."""
        if poll is not None:
            return poll
        return IDLE_CAP_SECONDS if self.listening else POLL_SECONDS

    def wake(self) -> None:
        with self._cond:
            self.generation += 1
            self._cond.notify_all()

    def wait(self, seen: int, seconds: float) -> bool:
        """Sleep up to `seconds` unless woken since `seen` (or while waiting); True if woken."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self.generation != seen or self._stopped.is_set(), timeout=seconds
            )

    def _listen(self) -> None:
        delay = 0.5
        while not self._stopped.is_set():
            conn = None
            try:
                conn = self._connect()
                conn.execute(LISTEN)
                self.listening, delay = True, 0.5
                self.wake()  # notifications may have been missed while we were not listening
                while not self._stopped.is_set():
                    for _ in conn.notifies(timeout=LISTEN_TIMEOUT):
                        self.wake()
            except Exception as exc:  # the database restarts; idle threads poll meanwhile
                if not self._stopped.is_set():
                    log.warning("workflow wake listener lost its connection: %s", exc)
            finally:
                self.listening = False
                if conn is not None:
                    with contextlib.suppress(Exception):  # already broken
                        conn.close()
            self._stopped.wait(delay)
            delay = min(delay * 2, RECONNECT_MAX_SECONDS)

    def _connect(self):
        """A connection of its own (not Django's per-thread one), autocommit, for LISTEN."""
        wrapper = connections[self.using]
        conn = wrapper.get_new_connection(wrapper.get_connection_params())
        conn.autocommit = True
        return conn
