"""Queue publishing: hand a raw event to django-q2 so a consumer picks it up, in the caller's
transaction on the ORM broker (where deliveries share consume tasks through tickets) or after
commit on Redis. docs/ingest.md › The queue says why no delivery is missed."""

import logging
from datetime import timedelta

from django.db import DEFAULT_DB_ALIAS, DatabaseError, transaction
from django.utils import timezone

from ingest.models import TraceLevel
from ingest.store import deliveries as store
from ingest.traces import trace_write

log = logging.getLogger(__name__)

CONSUME_TASK = "ingest.tasks.consume_raw_event"
CONSUME_PENDING_TASK = "ingest.tasks.consume_pending"
TICKET_FRESH = timedelta(seconds=2)


def raw_event_enqueue(*, raw_event_id: int, request_id: str = "", trace: bool = True) -> bool:
    """Queue a row so that a worker only ever sees it committed (replays, the SQLite webhook).

    On the ORM broker (same database) the row joins a shared consume task (its ticket, see
    above) in the surrounding transaction: both commit or neither does, at the cost of one
    commit instead of two. On Redis it is pushed after commit. A failed publish is logged and
    traced; the row stays pending for the drain. Returns True when the task is already in (the
    ORM case), False when it is published later or failed. trace=False leaves the
    queue_published trace to the caller (the webhook writes it in one insert with its own)."""
    if tickets_used() and transaction.get_connection().in_atomic_block:
        try:
            consume_ticket_join()
        except DatabaseError:
            raise  # the transaction is broken: the delivery must fail (503)
        except Exception as exc:
            publish_failed(raw_event_id, request_id, exc)
            return False
        if trace:
            trace_write("queue_published", raw_event_id=raw_event_id, request_id=request_id)
        return True
    transaction.on_commit(lambda: queue_publish(raw_event_id, request_id=request_id))
    return False


def consume_ticket_join() -> int:
    """Inside the caller's transaction on the ORM broker: join the queued consume task that has
    not started yet, or queue one (ticket and task commit with the caller's rows, or neither
    does). Returns the ticket's id. A database error propagates: the transaction is broken."""
    now = timezone.now()
    found = store.ticket_fresh(now - TICKET_FRESH)
    if found is not None:
        return found
    ticket = store.ticket_insert(now)
    from django_q.tasks import async_task

    try:
        async_task(
            CONSUME_PENDING_TASK,
            ticket,
            broker=_get_broker(),
            save=False,
            task_name=f"consume-pending-{ticket}",
        )
    except Exception:
        # No task behind it: later deliveries must not join this ticket.
        store.ticket_delete(ticket)
        raise
    return ticket


def consume_ticket_release(ticket: int | None) -> None:
    """The task's first act, outside any transaction: delete its ticket (and tickets too old to
    be joined: their tasks may be lost). On PostgreSQL this waits for the deliveries that
    joined them to commit, so the claims that follow see their rows."""
    store.tickets_release(ticket, timezone.now() - TICKET_FRESH)


def consume_ticket_ensure() -> None:
    """A running consume task that still finds work: make sure another task is queued (so the
    cluster's other workers join in, and the work goes on after this one stops)."""
    if not tickets_used():
        return
    with transaction.atomic():
        consume_ticket_join()


def tickets_used() -> bool:
    """Consume tasks are shared on the ORM broker of the default database (not in django-q2's
    sync mode, which would run the task inside the caller's transaction)."""
    from django_q.conf import Conf

    return Conf.ORM == DEFAULT_DB_ALIAS and not Conf.SYNC


_broker = None


def _get_broker():
    # One broker per process: django-q2 builds a new one (a new Redis pool) for every task.
    global _broker
    if _broker is None:
        from django_q.brokers import get_broker

        _broker = get_broker()
    return _broker


def publish_failed(raw_event_id: int, request_id: str, exc: Exception) -> None:
    log.exception("could not enqueue raw event %s", raw_event_id)
    trace_write(
        "queue_publish_failed",
        raw_event_id=raw_event_id,
        request_id=request_id,
        level=TraceLevel.ERROR,
        data={"error": f"{exc.__class__.__name__}: {exc}"[:500]},
    )


def queue_publish(
    raw_event_id: int, *, request_id: str = "", in_transaction: bool = False, trace: bool = True
) -> bool:
    """Hand one row to django-q2 now. Returns False (and traces why) when that fails. Inside a
    transaction a database error is not swallowed: the transaction is broken and must fail."""
    from django_q.tasks import async_task

    try:
        async_task(
            CONSUME_TASK,
            raw_event_id,
            broker=_get_broker(),
            save=False,  # failures are still saved; successes would only bloat the task table
            task_name=f"consume-{raw_event_id}",
        )
    except DatabaseError:
        if in_transaction:
            raise
        log.exception("could not enqueue raw event %s", raw_event_id)
        return False
    except Exception as exc:
        publish_failed(raw_event_id, request_id, exc)
        return False
    if trace:
        trace_write("queue_published", raw_event_id=raw_event_id, request_id=request_id)
    return True
