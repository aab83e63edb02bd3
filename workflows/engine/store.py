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

# -- create (engine/create.py) -------------------------------------------------------------------

# Insert an instance, its label rows and its first task, only while the deployment row still
# says the version this process saw active (d) and the id is new (ON CONFLICT DO NOTHING).
# Columns are listed in full: the models' defaults live in Django, not in the tables. Labels
# come as two arrays so every create shares one text. The task is free (a runner claims it) or
# leased at once to the caller, as a claim would (lease by the server's clock, fencing token 1).
_CREATE_CTES = """d AS (
    SELECT 1 FROM workflow_deployment WHERE workflow_name = %s AND active_version = %s
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


@functools.lru_cache(maxsize=256)
def with_ctes(head: tuple[str, ...], writes: tuple[str, ...], end: str) -> str:
    """One statement: the `head` CTEs, then each write as `wN AS (...)`, then `end`. Cached: a
    boundary's text is one of a few shapes, and the same str object each time is hashed once
    (pgwire keeps prepared statements by text)."""
    ctes = [*head, *(f"w{n} AS ({sql})" for n, sql in enumerate(writes, len(head)))]
    return f"WITH {', '.join(ctes)} {end}"
