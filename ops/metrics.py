"""GET /metrics in Prometheus text format.

Two kinds of figures:
- counters and histograms that processes update as work happens (webhook requests, consumer
  outcomes): prometheus-client metrics in each app. With PROMETHEUS_MULTIPROC_DIR set (`serve`
  sets it for all of its children) every process writes them to files there and a scrape adds
  them up, so several gunicorn workers and the qcluster's workers answer as one.
- gauges computed at scrape time from the database by functions the apps register here
  (`scrape_register`), each an index-backed query over a small set (unfinished rows, open tasks,
  heartbeats), never a count over a whole big table.

Access: an operator key with the `metrics:read` scope (X-Admin-Key, or `Authorization: Bearer`
as Prometheus' scrape config sends it), unless METRICS_PUBLIC=true. With the database down the
scrape answers 503 `{"code": "database_unavailable"}` with Retry-After (its gauges and the key
check need it): Prometheus records the target down, which is what it is.
"""

import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Metric,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily

from ops.errors import ErrorCode, error_body
from ops.models import ApiKey
from ops.services import secret_hash

log = logging.getLogger(__name__)

SCOPE = "metrics:read"
ScrapeFn = Callable[[], Iterable[Metric]]
_scrapers: dict[str, ScrapeFn] = {}


def scrape_register(name: str, fn: ScrapeFn) -> None:
    """An app's scrape-time gauges (called from its AppConfig.ready)."""
    _scrapers[name] = fn


def gauge(name: str, documentation: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"vitalflow_{name}", documentation, labels=labels)


class _ScrapeCollector:
    def collect(self):
        for name, fn in _scrapers.items():
            try:
                yield from fn()
            except (OperationalError, InterfaceError):
                raise  # the database is down, not one figure: the whole scrape answers 503
            except Exception:  # one broken figure must not blank the whole scrape
                log.exception("metrics: %s failed", name)
                up = gauge("scrape_error", "1 when a group of gauges failed", ["group"])
                up.add_metric([name], 1)
                yield up


class _ThisProcess:
    """Without PROMETHEUS_MULTIPROC_DIR: this process's own counters (runserver, tests)."""

    def collect(self):
        return REGISTRY.collect()


def registry_for_scrape() -> CollectorRegistry:
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(_ThisProcess())
    registry.register(_ScrapeCollector())
    return registry


def multiproc_dir_prepare() -> str:
    """PROMETHEUS_MULTIPROC_DIR for this process's children: the one set, or $VAR_DIR/prometheus,
    emptied (files of a previous run would be added to this one's)."""
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or str(Path(settings.VAR_DIR) / "prometheus")
    os.makedirs(path, exist_ok=True)
    for stale in Path(path).glob("*.db"):
        stale.unlink(missing_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    return path


def _presented_key(request) -> str:
    key = request.headers.get("X-Admin-Key", "")
    if not key:
        header = request.headers.get("Authorization", "")
        key = header[len("Bearer ") :] if header.startswith("Bearer ") else ""
    return key.strip()


def key_status(request) -> int:
    """200 when the request carries an operator key with the metrics:read scope (or "*"), else
    401 (no or unknown key) or 403 (a key without the scope). /readyz's details need the same.
    A database error propagates: the key cannot be checked."""
    raw = _presented_key(request)
    if not raw:
        return 401
    key = ApiKey.objects.filter(key_hash=secret_hash(raw), revoked_at__isnull=True).first()
    if key is None:
        return 401
    return 200 if SCOPE in key.scopes or "*" in key.scopes else 403


RETRY_AFTER_SECONDS = 5


@never_cache
@require_GET
def metrics_view(request):
    try:
        status = 200 if getattr(settings, "METRICS_PUBLIC", False) else key_status(request)
        if status != 200:
            return _refused(status)
        body = generate_latest(registry_for_scrape())
    except (OperationalError, InterfaceError) as exc:
        log.warning("metrics: database unavailable: %s", exc)
        response = JsonResponse(
            error_body(
                ErrorCode.DATABASE_UNAVAILABLE, "The database is unavailable; retry shortly."
            ),
            status=503,
        )
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


def _refused(status: int) -> JsonResponse:
    if status == 401:
        body = error_body(
            ErrorCode.AUTHENTICATION_REQUIRED,
            f"Send an operator key with the {SCOPE!r} scope (X-Admin-Key or Bearer).",
        )
    else:
        body = error_body(ErrorCode.PERMISSION_DENIED, f"This needs the {SCOPE!r} scope.")
    response = JsonResponse(body, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="vitalflow-metrics"'
    return response


def liveness_gauges():
    """Live (not stale) and stuck (beating, work waiting, nothing finished) worker processes
    by kind, from the heartbeat table (a few rows)."""
    from ops import liveness

    workers = liveness.workers_live()
    live = gauge("workers_live", "Worker processes whose heartbeat is fresh", ["kind"])
    for kind, n in liveness.live_count_by_kind(workers).items():
        live.add_metric([kind], n)
    yield live
    stuck = gauge(
        "workers_stuck",
        "Worker processes that beat but have finished nothing for WORKER_STUCK_SECONDS "
        "while work waits",
        ["kind"],
    )
    for kind, n in liveness.stuck_count_by_kind(workers).items():
        stuck.add_metric([kind], n)
    yield stuck
