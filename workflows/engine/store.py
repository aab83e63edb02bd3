"""Every SQL statement of the engine, each a named constant or builder with a line on what it does.

The engine's modules import their statements from here and run them through ops.pgwire (one
prepared statement, PostgreSQL) or Django's cursor; no SQL text lives anywhere else in
workflows/. Texts are fixed strings where they can be: pgwire keeps prepared statements by text.
"""

import functools

from workflows.models import Status, TaskKind

# -- clocks and wakes ---------------------------------------------------------------------------

# The server's clock: a NULL parameter means statement_timestamp() (stable within a statement,
# so the planner still walks workflow_task_runnable); the harness passes its manual time.
DB_NOW = "COALESCE(%s::timestamptz, statement_timestamp())"
# The channel idle runners LISTEN on (engine/wake.py).
CHANNEL = "workflows_wake"
# Wake idle runners; delivered when the transaction commits.
NOTIFY = f"NOTIFY {CHANNEL}"
# Listen for wakes (the runner's listener connection).
LISTEN = f"LISTEN {CHANNEL}"
# The server's clock now, in seconds (dbclock measures the local clock's offset from it).
SERVER_CLOCK = "SELECT extract(epoch FROM clock_timestamp())"

# -- claim (engine/claim.py) ---------------------------------------------------------------------

# Runnable = run_at set and due, lease free or expired, in the partial index's order. One
# statement claims the task, flips a waiting instance to active and returns what the run needs.
_DUE_AND_FREE = f"run_at <= {DB_NOW} AND (locked_until IS NULL OR locked_until <= {DB_NOW})"
# The next runnable task, locked; rows other runners hold are skipped.
_PG_NEXT = f"""(
        SELECT id FROM workflow_task
        WHERE run_at IS NOT NULL AND {_DUE_AND_FREE}
        ORDER BY priority, run_at, id
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    )"""
# The claim commits without waiting for its WAL flush (synchronous_commit off for this one
# transaction): no step runs before the run's first boundary, whose synchronous commit flushes
# the WAL up to and past the claim, so a claim a server crash could lose is one nothing acted
# on yet. The instance row keeps updated_at unless its status flips: with no indexed column
# changed the UPDATE is HOT (no new entries in the instance's indexes).
_CLAIM_TEMPLATE = """
WITH {pick}c AS (
    UPDATE workflow_task
    SET lock_owner = %s, locked_until = {now} + make_interval(secs => %s),
        fencing_token = fencing_token + 1, claims = claims + 1,
        recovery_attempts = recovery_attempts + 1
    WHERE id = {target}
    RETURNING id, instance_id, run_number, fencing_token, kind, claims, recovery_attempts
), i AS (
    UPDATE workflow_instance w
    SET status = 'active', started_at = COALESCE(w.started_at, %s),
        updated_at = CASE WHEN w.status = 'active' THEN w.updated_at ELSE %s END
    FROM c
    WHERE w.id = c.instance_id AND w.run_number = c.run_number
      AND w.status IN ('active', 'waiting')
    RETURNING w.id, w.workflow_name, w.instance_id, w.version, w.params, w.created_at,
              w.request_id, w.code_fingerprint, w.parent_id IS NOT NULL AS has_parent
)
SELECT c.id, c.instance_id, c.run_number, c.fencing_token, c.kind, c.claims,
       i.workflow_name, i.instance_id, i.version, i.params, i.created_at, i.request_id,
       i.code_fingerprint, c.recovery_attempts, i.has_parent{extra},
       set_config('synchronous_commit', 'off', true)
FROM {source}
"""
# The claimed task beside its instance (none when the instance is no longer runnable).
_CLAIMED = "c LEFT JOIN i ON i.id = c.instance_id"
# Claim the next runnable task and load what its run needs, in one statement.
CLAIM_NEXT = _CLAIM_TEMPLATE.format(pick="", now=DB_NOW, target=_PG_NEXT, extra="", source=_CLAIMED)

# Capped deployments: pick (skipping full groups), then recount under the group's lock.
# The groups whose live leases have reached their cap.
_FULL_GROUPS = f"""
SELECT concurrency_group FROM workflow_task
WHERE locked_until > {DB_NOW} AND concurrency_limit IS NOT NULL
GROUP BY concurrency_group HAVING count(*) >= min(concurrency_limit)
"""
# Lock the next runnable task whose group (if capped) is below its cap; not claimed yet.
PICK_CAPPED = f"""
SELECT id, concurrency_group, concurrency_limit FROM workflow_task
WHERE run_at IS NOT NULL AND {_DUE_AND_FREE}
  AND (concurrency_limit IS NULL OR concurrency_group NOT IN ({_FULL_GROUPS}))
ORDER BY priority, run_at, id
LIMIT 1
FOR UPDATE SKIP LOCKED
"""
# Serialise the claims of one concurrency group until the transaction ends.
LOCK_GROUP = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 13))"
# How many tasks of a group hold a live lease (the recount under the group's lock).
COUNT_RUNNING = f"""
SELECT count(*) FROM workflow_task
WHERE concurrency_group = %s AND concurrency_limit IS NOT NULL AND locked_until > {DB_NOW}
"""
# A row PICK_CAPPED locked, in the caller's transaction.
CLAIM_PICKED = _CLAIM_TEMPLATE.format(pick="", now=DB_NOW, target="%s", extra="", source=_CLAIMED)
# Capped deployments, one statement: pick as PICK_CAPPED does and claim the row at once when its
# workflow has no cap. A capped row comes back unclaimed (its concurrency_limit set, c empty)
# and goes the recount path; most rows of a deployment with one capped workflow are uncapped.
PICK_AND_CLAIM_UNCAPPED = _CLAIM_TEMPLATE.format(
    pick=f"p AS ({PICK_CAPPED}), ",
    now=DB_NOW,
    target="(SELECT id FROM p WHERE concurrency_limit IS NULL)",
    extra=", p.concurrency_limit",
    source="p LEFT JOIN c ON c.id = p.id LEFT JOIN i ON i.id = c.instance_id",
)


# -- create (engine/create.py) -------------------------------------------------------------------

# Insert an instance, its label rows and its first task, only while the deployment row still
# says the version this process saw active (d) and the id is new (ON CONFLICT DO NOTHING).
# Columns are listed in full: the models' defaults live in Django, not in the tables. Labels
# come as two arrays so every create shares one text. The task is free (a runner claims it) or
# leased at once to the caller, as a claim would (lease by the server's clock, fencing token 1).
_CREATE_CTES = """d AS (
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


def _create_ctes(*, fingerprint: str, started: str, lease: str) -> str:
    return _CREATE_CTES.format(
        active=Status.ACTIVE,
        start=TaskKind.START,
        now=DB_NOW,
        fingerprint=fingerprint,
        started=started,
        lease=lease,
    )


# The create's CTEs with a free task (a runner claims it).
CREATE_QUEUED_CTES = _create_ctes(
    fingerprint="''", started="NULL", lease="'',\n        NULL, 0, 0, 0,"
)
# The create's CTEs with the task leased to the caller; fingerprint and started_at are written.
CREATE_LEASED_CTES = _create_ctes(
    fingerprint="%s",
    started="%s",
    lease=f"%s,\n        {DB_NOW} + make_interval(secs => %s), 1, 1, %s,",
)
# Create a runnable instance and wake idle runners (pg_notify is delivered on commit).
CREATE_QUEUED = f"WITH {CREATE_QUEUED_CTES} SELECT i.id, pg_notify('{CHANNEL}', '') FROM i"
# Create an instance whose first task is leased to the caller; returns instance and task ids.
CREATE_LEASED = f"WITH {CREATE_LEASED_CTES} SELECT i.id, t.id FROM i, t"
# What ends a first boundary that carries the create: the new instance's and task's ids.
CREATE_LEASED_END = "SELECT i.id, t.id FROM i, t"
# A step or log row's instance in a statement that creates it. No instance inserted (the id
# exists, the version moved): count(*) is 0 and division_by_zero aborts the statement.
NEW_INSTANCE = "(SELECT min(id) + 0 / count(*) FROM i)"

# -- step boundaries (engine/persist.py) ----------------------------------------------------------

# The task row is the mutex: services lock it before touching the instance, pause clears its
# run_at, terminate deletes it, restart bumps the fencing token. So one guarded UPDATE both
# renews our lease and tells us whether we may go on.
GUARD = """
UPDATE workflow_task SET locked_until = %s,
    recovery_attempts = CASE WHEN %s THEN 0 ELSE recovery_attempts END
WHERE id = %s AND fencing_token = %s AND locked_until > %s
RETURNING run_at
"""
# PostgreSQL: the lease is judged and extended by the server's clock (DB_NOW). The task
# row is locked (FOR NO KEY UPDATE) and written only when there is something to write: the
# lease has less than two thirds left, or progress resets a recovery count that is not 0. Every
# UPDATE of workflow_task is a new row version with new entries in all its indexes (the capped
# index's predicate names locked_until, so none is HOT); most boundaries now write none.
LOCK_TASK = f"""t AS (
    SELECT id, run_at, locked_until, recovery_attempts FROM workflow_task
    WHERE id = %s AND fencing_token = %s AND locked_until > {DB_NOW}
    FOR NO KEY UPDATE
)"""
# Extend our lease when it is a third gone, or reset the recovery count on progress.
RENEW_LEASE = f"""renewed AS (
    UPDATE workflow_task w SET locked_until = {DB_NOW} + make_interval(secs => %s),
        recovery_attempts = CASE WHEN %s THEN 0 ELSE w.recovery_attempts END
    FROM t
    WHERE w.id = t.id AND (
        t.locked_until < {DB_NOW} + make_interval(secs => %s * 2 / 3) OR (%s AND t.recovery_attempts <> 0)
    )
    RETURNING 1
)"""
# The guard on PostgreSQL: lock our task, renew the lease if due, answer its run_at.
GUARD_PG = f"WITH {LOCK_TASK}, {RENEW_LEASE} SELECT run_at FROM t"
# The one-statement boundary's end: a task that is no longer ours or is paused (run_at NULL)
# fails the statement with division_by_zero, so the server rolls back every write in it.
# count(*) is computed at run time, so the division is never folded into an error at plan time.
ABORT_UNLESS_OURS = "SELECT 1 / count(*) FROM t WHERE run_at IS NOT NULL"
# The same, waking idle runners (engine/wake.py): pg_notify is NOTIFY, sent on commit only.
ABORT_AND_WAKE = (
    f"SELECT 1 / count(*) FROM t, (SELECT pg_notify('{CHANNEL}', '')) AS wake "
    "WHERE t.run_at IS NOT NULL"
)


# Mark an event consumed by the step that took it.
CONSUME_EVENT = "UPDATE workflow_event SET consumed_at = %s, consumed_by_step = %s WHERE id = %s"
# Record the code fingerprint a run started on (when no outcome UPDATE carries it).
SET_FINGERPRINT = "UPDATE workflow_instance SET code_fingerprint = %s WHERE id = %s"
# Finish or terminate: the task goes, if it is still ours.
DELETE_TASK = "DELETE FROM workflow_task WHERE id = %s AND fencing_token = %s"
# The test hook's "backend dies before COMMIT" (storage_faults): this session ends itself.
TERMINATE_SELF = "SELECT pg_terminate_backend(pg_backend_pid())"


@functools.lru_cache(maxsize=16)
def delete_steps(count: int) -> str:
    """Delete `count` step rows of a run by name (trimmed loop iterations)."""
    names = ", ".join(["%s"] * count)
    return f"DELETE FROM workflow_step WHERE instance_id = %s AND run_number = %s AND name IN ({names})"


@functools.lru_cache(maxsize=32)
def release_task(columns: tuple[str, ...]) -> str:
    """Give up the lease (resetting the recovery count: every release ends a boundary that is
    progress), setting `columns` too; guarded by the fencing token."""
    sets = ["lock_owner = ''", "locked_until = NULL", "recovery_attempts = 0"]
    sets += [f"{column} = %s" for column in columns]
    return f"UPDATE workflow_task SET {', '.join(sets)} WHERE id = %s AND fencing_token = %s"


@functools.lru_cache(maxsize=32)
def update_instance(columns: tuple[str, ...]) -> str:
    """Set `columns` of one instance row (an outcome: waiting, complete, errored)."""
    sets = ", ".join(f"{column} = %s" for column in columns)
    return f"UPDATE workflow_instance SET {sets} WHERE id = %s"


def insert_template(table: str, columns: tuple[str, ...]) -> str:
    """An INSERT of `columns` into `table` whose VALUES rows insert_rows fills in."""
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES {{}}"


def step_upsert(columns: tuple[str, ...]) -> str:
    """Insert step rows; a row already there for (instance, run, name) takes the new values."""
    tail = ", ".join(f"{c} = excluded.{c}" for c in columns[3:])
    on_conflict = f" ON CONFLICT (instance_id, run_number, name) DO UPDATE SET {tail}"
    return insert_template("workflow_step", columns) + on_conflict


@functools.lru_cache(maxsize=128)
def insert_rows(template: str, width: int, count: int, new: bool) -> str:
    """`template` with `count` rows of `width` placeholders; the instance (always the first
    column) as NEW_INSTANCE when `new` (the statement creates the instance too)."""
    one = "(" + ", ".join([NEW_INSTANCE] * new + ["%s"] * (width - new)) + ")"
    return template.format(", ".join([one] * count))


# A finished child makes its parent runnable now (unless the parent is paused: run_at NULL,
# resume replays it anyway), in the transaction that finishes the child, so no wake is lost.
WAKE_PARENT = """
UPDATE workflow_task SET run_at = %s, kind = 'event', priority = 0
WHERE run_at IS NOT NULL
  AND instance_id = (SELECT parent_id FROM workflow_instance WHERE id = %s)
"""


@functools.lru_cache(maxsize=256)
def with_ctes(head: tuple[str, ...], writes: tuple[str, ...], end: str) -> str:
    """One statement: the `head` CTEs, then each write as `wN AS (...)`, then `end`. Cached: a
    boundary's text is one of a few shapes, and the same str object each time is hashed once
    (pgwire keeps prepared statements by text)."""
    ctes = [*head, *(f"w{n} AS ({sql})" for n, sql in enumerate(writes, len(head)))]
    return f"WITH {', '.join(ctes)} {end}"
