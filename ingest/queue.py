"""Queue publishing: hand a raw event to django-q2 so a consumer picks it up, in the caller's
transaction on the ORM broker or after commit on Redis."""

import logging
import uuid

from django.db import DEFAULT_DB_ALIAS, DatabaseError, transaction
from django.utils import timezone

from ingest.models import TraceLevel
from ingest.traces import trace_write
from ops import tracing

log = logging.getLogger(__name__)

CONSUME_TASK = "ingest.tasks.consume_raw_event"


def raw_event_enqueue(*, raw_event_id: int, request_id: str = "", trace: bool = True) -> bool:
    """Publish the consume task so that a worker only ever sees it with the row committed.

    On the ORM broker (same database) the task row is inserted in the surrounding transaction:
    both commit or neither does, at the cost of one commit instead of two. On Redis it is
    pushed after commit. A failed publish is logged and traced; the row stays pending for the
    drain. Returns True when the task is already in (the ORM case), False when it is published
    later or failed. trace=False leaves the queue_published trace to the caller (the webhook
    writes it in one insert with its own)."""
    if _broker_shares_the_transaction():
        return queue_publish(raw_event_id, request_id=request_id, in_transaction=True, trace=trace)
    transaction.on_commit(lambda: queue_publish(raw_event_id, request_id=request_id))
    return False


def _broker_shares_the_transaction() -> bool:
    return orm_broker_in_database() and transaction.get_connection().in_atomic_block


def orm_broker_in_database() -> bool:
    """The broker is django-q2's ORM broker on the default database and tasks are not run inline
    (Conf.SYNC must wait for the commit like a real worker would): a task is then a row the
    caller can insert in its own statement (orm_message)."""
    from django_q.conf import Conf

    return Conf.ORM == DEFAULT_DB_ALIAS and not Conf.SYNC


def orm_message(raw_event_id: int) -> tuple[str, str, object]:
    """(key, payload, lock) of the django_q_ormq row that publishes raw_event_id's consume task,
    built as django-q2's async_task + ORM broker build it (same signed package, same keys), for
    a caller that inserts it in the statement that inserts the row (ingest.deliveries): one
    round trip instead of an ORM save per delivery. Only for orm_broker_in_database(). Like
    queue_publish, the message carries the current span's traceparent when there is one."""
    from django_q.conf import Conf
    from django_q.signals import pre_enqueue
    from django_q.signing import SignedPackage

    task = {
        "id": uuid.uuid4().hex,
        "name": f"consume-{raw_event_id}",
        "func": CONSUME_TASK,
        "args": (raw_event_id,),
        "save": False,  # as queue_publish: failures are still saved
    }
    if Conf.CACHED:
        task["cached"] = Conf.CACHED
    if Conf.ACK_FAILURES:
        task["ack_failure"] = Conf.ACK_FAILURES
    parent = tracing.traceparent()
    task["kwargs"] = {"traceparent": parent} if parent else {}
    task["started"] = timezone.now()
    pre_enqueue.send(sender="django_q", task=task)
    broker = _get_broker()
    return broker.list_key or Conf.CLUSTER_NAME, SignedPackage.dumps(task), task["started"]


_broker = None


def _get_broker():
    # One broker per process: django-q2 builds a new one (a new Redis pool) for every task.
    global _broker
    if _broker is None:
        from django_q.brokers import get_broker

        _broker = get_broker()
    return _broker


def queue_publish(
    raw_event_id: int, *, request_id: str = "", in_transaction: bool = False, trace: bool = True
) -> bool:
    """Hand one row to django-q2 now. Returns False (and traces why) when that fails. Inside a
    transaction a database error is not swallowed: the transaction is broken and must fail."""
    from django_q.tasks import async_task

    # With OpenTelemetry on, the message carries the current (webhook) span so the consumer's
    # span can link to it; without it the message is exactly as before.
    parent = tracing.traceparent()
    try:
        async_task(
            CONSUME_TASK,
            raw_event_id,
            **({"traceparent": parent} if parent else {}),
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
        log.exception("could not enqueue raw event %s", raw_event_id)
        trace_write(
            "queue_publish_failed",
            raw_event_id=raw_event_id,
            request_id=request_id,
            level=TraceLevel.ERROR,
            data={"error": f"{exc.__class__.__name__}: {exc}"[:500]},
        )
        return False
    if trace:
        trace_write("queue_published", raw_event_id=raw_event_id, request_id=request_id)
    return True
