"""instance_create as one statement: PostgreSQL, outside any transaction (issue 15).

Through the ORM a create is six round trips (BEGIN, read the active version, INSERT the
instance, INSERT its task, NOTIFY, COMMIT). Here it is one prepared statement sent in
autocommit, so it is its own transaction: data-modifying CTEs insert the instance, its label
rows and its first task, and the final SELECT calls pg_notify, delivered on commit like the
NOTIFY of schedule_wake (runner/wake.py).

The active version is the one this process last saw active for the workflow (`_seen`, filled by
services.instance_create's ORM path after workflow_active_version validated it). The statement
inserts only while the deployment row still says that version and is not disabled
(workflows.rollout), so an activation or a disable by an operator or another process is never
missed; nor is an instance id that already exists (ON CONFLICT DO
NOTHING). Either way nothing is written, no notification is sent, and `insert` returns False:
the caller falls back to the ORM path, which reads the pointer again (and creates it on first
use) or raises InstanceIdAlreadyExists.
"""

import json

from django.db import connection

from ops import pgwire
from workflows import concurrency
from workflows.authoring import registry
from workflows.models import Status, TaskKind, WorkflowInstance, start_priority
from workflows.runner.claim import DB_NOW, Lease, db_now_param
from workflows.runner.wake import CHANNEL

_seen: dict[str, int] = {}  # workflow name -> the active version this process last read


def remember_active(name: str, version: int) -> None:
    _seen[name] = version


def applies() -> bool:
    """PostgreSQL with no transaction open on this thread's connection."""
    return pgwire.postgres_autocommit()


def known_active(name: str) -> int | None:
    """The version to try, or None (never seen, or no longer registered here): the ORM path."""
    version = _seen.get(name)
    if version is None or registry.get(name, version) is None:
        return None
    return version


# Columns are listed in full: the models' defaults live in Django, not in the tables. The label
# rows come from two arrays (keys, values) so every create shares one statement text, prepared
# once per connection. run_at is DB_NOW: the server's clock, as dbclock.due_now gives the ORM
# path, or the harness's manual time. The task is either free (a runner claims it) or, for
# runner/here.py, leased at once to the caller, as a claim would (lease judged by
# the server's clock, fencing token 1, a claim without progress counted).
_CTES = """d AS (
    SELECT 1 FROM workflow_deployment
    WHERE workflow_name = %s AND active_version = %s AND NOT disabled
), i AS (
    INSERT INTO workflow_instance (
        workflow_name, instance_id, version, status, run_number, params, output, error,
        request_id, priority, code_fingerprint, labels, parent_id,
        created_at, updated_at, started_at, completed_at
    )
    SELECT %s, %s, %s, '{active}', 1, %s::jsonb, NULL, NULL,
        %s, %s, {fingerprint}, %s::jsonb, NULL,
        %s, %s, {started}, NULL
    FROM d
    ON CONFLICT (workflow_name, instance_id) DO NOTHING
    RETURNING id
), l AS (
    INSERT INTO workflow_instance_label (instance_id, key, value)
    SELECT i.id, x.key, x.value FROM i, unnest(%s::text[], %s::text[]) AS x(key, value)
), t AS (
    INSERT INTO workflow_task (
        instance_id, run_number, kind, priority, run_at, wait_event_type, lock_owner,
        locked_until, fencing_token, claims, recovery_attempts,
        concurrency_group, concurrency_limit, created_at
    )
    SELECT i.id, 1, '{start}', %s, {now}, '', {lease}
        %s, %s, %s
    FROM i
    RETURNING id
)"""
_FREE = "'',\n        NULL, 0, 0, 0,"
_LEASED = f"%s,\n        {DB_NOW} + make_interval(secs => %s), 1, 1, %s,"


def _ctes(*, fingerprint: str, started: str, lease: str) -> str:
    return _CTES.format(
        active=Status.ACTIVE,
        start=TaskKind.START,
        now=DB_NOW,
        fingerprint=fingerprint,
        started=started,
        lease=lease,
    )


_QUEUED_CTES = _ctes(fingerprint="''", started="NULL", lease=_FREE)
# Leased: the run's code fingerprint and started_at are written with the row.
LEASED_CTES = _ctes(fingerprint="%s", started="%s", lease=_LEASED)
_INSERT = f"WITH {_QUEUED_CTES} SELECT i.id, pg_notify('{CHANNEL}', '') FROM i"
_INSERT_LEASED = f"WITH {LEASED_CTES} SELECT i.id, t.id FROM i, t"


def insert(instance: WorkflowInstance, now) -> bool:
    """Insert `instance` (validated, unsaved, of the version known_active gave) with its labels
    and first task in one round trip; True and its pk set, or False with nothing written."""
    with connection.wrap_database_errors:
        row = pgwire.execute(_INSERT, insert_params(instance, now))  # its own transaction
    if row is None:
        return False
    _saved(instance, row[0])
    return True


def insert_leased(instance: WorkflowInstance, now, lease: Lease) -> int | None:
    """insert() with the task leased to `lease.owner` and no NOTIFY (no other runner is to take
    it); the task's pk, or None with nothing written."""
    with connection.wrap_database_errors:
        row = pgwire.execute(_INSERT_LEASED, insert_params(instance, now, lease))
    if row is None:
        return None
    _saved(instance, row[0])
    return row[1]


def insert_params(instance: WorkflowInstance, now, lease: Lease | None = None) -> list:
    """The parameters of _QUEUED_CTES, or of LEASED_CTES when `lease` is given."""
    slot = concurrency.task_fields(instance.workflow_name, instance.version, instance.params)
    name = instance.workflow_name
    leased = lease is not None
    return [
        name,
        instance.version,
        name,
        instance.instance_id,
        instance.version,
        None if instance.params is None else json.dumps(instance.params),
        instance.request_id,
        instance.priority,
        *([lease.fingerprint] if leased else []),
        json.dumps(instance.labels),
        now,
        now,
        *([now] if leased else []),
        list(instance.labels),
        list(instance.labels.values()),
        start_priority(instance.priority),
        db_now_param(now),
        *(
            [lease.owner, db_now_param(now), lease.seconds, lease.recovery_attempts]
            if leased
            else []
        ),
        slot["concurrency_group"],
        slot["concurrency_limit"],
        now,
    ]


def _saved(instance: WorkflowInstance, pk: int) -> None:
    instance.pk = pk
    instance._state.adding = False
    instance._state.db = connection.alias
