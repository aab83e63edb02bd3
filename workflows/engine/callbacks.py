"""Running step callbacks with a timeout while the lease stays alive.

Callbacks run inline in the runner thread: handing each one to another thread costs a few
milliseconds of scheduling on a busy machine, more than a no-op step. A per-runner-thread
watchdog renews the lease while a callback runs, until the attempt's timeout. Python cannot
kill a thread, so an attempt that overruns is only judged when it returns: its late result is
discarded (StepTimeout). A callback that hangs for good keeps its runner thread, but the
watchdog stops renewing at the deadline, so another runner reclaims the task once the lease
lapses and this one's writes are fenced off.
"""

import logging
import threading
import time

from django.db import connections

from workflows.errors import StepTimeout

log = logging.getLogger(__name__)
_local = threading.local()


class _Watchdog:
    def __init__(self, every: float):
        self.every = every
        self.lock = threading.Lock()
        self.watch = None  # (renew, deadline) while a callback runs
        threading.Thread(target=self._loop, daemon=True, name="workflow-lease").start()

    def _loop(self) -> None:
        pause = threading.Event()  # never set: wait() sleeps (time.sleep fails under faketime)
        while True:
            pause.wait(self.every)
            with self.lock:
                watch = self.watch
            if watch is None:
                continue
            renew, deadline = watch
            if time.monotonic() < deadline:
                try:
                    if not renew():
                        self.stop()  # lost: the boundary after the callback will be refused
                except Exception:
                    # A lost connection must not end this thread: the next renewal opens a
                    # fresh one, and the lease outlasts a few missed renewals.
                    log.warning("renewing a workflow lease failed", exc_info=True)
                finally:
                    # Renewals are rare (steps longer than a third of the lease): do not keep
                    # an idle connection per runner thread open for them.
                    connections.close_all()

    def start(self, renew, deadline: float) -> None:
        with self.lock:
            self.watch = (renew, deadline)

    def stop(self) -> None:
        with self.lock:
            self.watch = None


def _watchdog(every: float) -> _Watchdog:
    dog = getattr(_local, "watchdog", None)
    if dog is None or dog.every != every:
        if dog is not None:
            dog.stop()
        dog = _local.watchdog = _Watchdog(every)
    return dog


def run_watched(callback, *, timeout_ms: int, renew_every: float, renew) -> tuple:
    """(value, None) or (None, exception), renewing the lease via `renew()` meanwhile."""
    dog = _watchdog(renew_every)
    started = time.monotonic()
    dog.start(renew, started + timeout_ms / 1000)
    try:
        value = callback()
    except Exception as exc:
        return None, exc
    finally:
        dog.stop()
    if (time.monotonic() - started) * 1000 > timeout_ms:
        return None, StepTimeout(f"attempt timed out after {timeout_ms} ms; result discarded")
    return value, None


def run_inline(callback, *, timeout_ms: int) -> tuple:
    """The harness: no lease to renew; the timeout is judged when the callback returns."""
    started = time.monotonic()
    try:
        value = callback()
    except Exception as exc:
        return None, exc
    if (time.monotonic() - started) * 1000 > timeout_ms:
        return None, StepTimeout(f"attempt timed out after {timeout_ms} ms; result discarded")
    return value, None
