"""Probes for orchestrators: /healthz (the process serves) and /readyz (it can do its job:
the database answers, migrations are applied, the broker answers when one is configured).

Plain Django views, not DRF: no authentication needed, no throttling, no database work in
/healthz. Every check is cheap (one SELECT 1, one PING); the migration check reads the migration
graph once per process and remembers success (a deploy that adds migrations starts new processes).
Anyone sees each check's name and state; what a failure says (hosts, ports, roles, errors) and
the workers of `?verbose=1` need an operator key with metrics:read (or a staff session).
"""

import logging

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from ops import liveness, metrics, store

log = logging.getLogger(__name__)

OK = "ok"
NOT_CONFIGURED = "not_configured"
_migrations_applied = False


def check_database() -> str:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(store.PING)
        cursor.fetchone()
    return OK


def check_migrations() -> str:
    global _migrations_applied
    if _migrations_applied:
        return OK
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        names = ", ".join(f"{m.app_label}.{m.name}" for m, _ in plan[:5])
        raise RuntimeError(f"{len(plan)} unapplied migration(s): {names}")
    _migrations_applied = True
    return OK


def check_broker() -> str:
    """Redis when REDIS_URL is set; the ORM broker is the database, checked above."""
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return NOT_CONFIGURED
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    finally:
        client.close()
    return OK


CHECKS = {"database": check_database, "migrations": check_migrations, "broker": check_broker}


def run_checks() -> tuple[dict[str, str], list[str]]:
    """({check: "ok" | "not_configured" | "error: …"}, [failing check names])."""
    results, failing = {}, []
    for name, check in CHECKS.items():
        if name == "migrations" and "database" in failing:
            results[name] = "skipped: database unavailable"
            failing.append(name)
            continue
        try:
            results[name] = check()
        except Exception as exc:  # a probe reports every failure, it never raises
            log.warning("readyz: %s check failed: %s", name, exc)
            results[name] = f"error: {type(exc).__name__}: {str(exc)[:200]}"
            failing.append(name)
    return results, failing


@never_cache
@require_GET
def healthz(request):
    return JsonResponse({"status": "ok"})


def state_of(result: str) -> str:
    """A check's result without its details: "error: OperationalError: … host …" → "error"."""
    return result.split(":", 1)[0]


def may_see_details(request) -> bool:
    """An operator key with metrics:read (or "*"), or a staff session (the console shows them
    the same). With the database down neither can be checked: the details stay in the log."""
    try:
        if metrics.key_status(request) == 200:
            return True
        user = getattr(request, "user", None)
        return bool(user is not None and user.is_active and user.is_staff)
    except Exception:  # a probe never raises; an unverifiable caller is an anonymous one
        log.info("readyz: caller not verified", exc_info=True)
        return False


@never_cache
@require_GET
def readyz(request):
    checks, failing = run_checks()
    details = may_see_details(request)
    if not details:
        checks = {name: state_of(result) for name, result in checks.items()}
    body = {"status": "ok" if not failing else "unavailable", "checks": checks}
    if failing:
        body.update(code="not_ready", message=f"Failing: {', '.join(failing)}.", failing=failing)
    if request.GET.get("verbose") in ("1", "true"):
        if details:
            body.update(verbose_details(database_ok="database" not in failing))
        else:
            body["details"] = (
                f"Check details and workers need an operator key with the {metrics.SCOPE!r} "
                "scope (X-Admin-Key or Bearer)."
            )
    return JsonResponse(body, status=503 if failing else 200)


def verbose_details(*, database_ok: bool) -> dict:
    """?verbose=1: the worker processes that beat lately (ops.liveness), stale and stuck ones
    marked: `last_progress` is when the process last finished work (a row, a step boundary),
    `stuck_seconds` how long it has beaten without finishing any while work waited."""
    if not database_ok:
        return {"workers": None}
    workers = liveness.workers_live()
    return {
        "workers": [
            {
                "kind": w["kind"],
                "host": w["host"],
                "pid": w["pid"],
                "state": w["state"],
                "last_seen": w["last_seen"].isoformat(),
                "stale": w["stale"],
                "last_progress": w["last_progress"].isoformat() if w["last_progress"] else None,
                "stuck": w["stuck"],
                "stuck_seconds": round(w["stuck_seconds"]) if w["stuck"] else None,
            }
            for w in workers
        ],
        "live_workers": liveness.live_count_by_kind(workers),
        "stuck_workers": liveness.stuck_count_by_kind(workers),
    }
