"""Outbound pacing: at most `per_second` calls to one destination across every process and host
that shares the database (PostgreSQL or SQLite; no Redis needed).

Each destination (a key you choose: "terra", "http:clinic.example") has a row holding the earliest
time of its next free slot, by the database's clock. `acquire` takes that slot in one atomic
statement (slots are 1 / per_second apart, so calls are evenly spaced: no burst), then sleeps until
it comes; a caller that would wait longer than `max_wait` takes nothing and gets `PaceExceeded`
with the seconds after which a retry would fit::

    from ops.pacing import PaceExceeded, acquire

    try:
        acquire("terra", per_second=2, max_wait=30)   # blocks up to 30 s, returns the wait
    except PaceExceeded as exc:
        ...  # reschedule the work in exc.retry_after seconds instead of blocking a worker
    client.get(...)

Call it outside a transaction: inside one, the row stays locked until commit on PostgreSQL and
every other caller of that key queues behind it. A taken slot is spent even if the caller then
dies or skips its call: the pace errs on the slow side, never the fast one.
"""

import time

from ops import ratestore


class PaceExceeded(Exception):
    """The next free slot for `key` is further away than the caller would wait."""

    def __init__(self, key: str, retry_after: float):
        super().__init__(
            f"{key}: no free call slot within the wait allowed; retry in {retry_after:.2f} s"
        )
        self.key = key
        self.retry_after = retry_after


def acquire(key: str, *, per_second: float, max_wait: float) -> float:
    """Block until one call to `key` is allowed under `per_second`; returns the seconds waited.
    Raises PaceExceeded (taking no slot) when that would mean waiting more than `max_wait`."""
    if per_second <= 0:
        raise ValueError("per_second must be positive")
    taken, wait = ratestore.pace_take(key=key, interval=1.0 / per_second, max_wait=max_wait)
    if not taken:
        raise PaceExceeded(key, retry_after=max(wait - max_wait, 0.0))
    if wait > 0:
        time.sleep(wait)
    return wait
