"""Request limits for the API, shared by every process through one table of counters in the
database (ops.ratestore: an atomic upsert per request, so N workers count as one, with or without
Redis).

One throttle, three principals, each with its rate in REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]:
an operator key (`operator`, per key), a user token or session (`user`, per user), anything
else (`anon`, per client IP). A window starts at the first request after the previous window
ended and lasts the rate's period: N requests per window, then 429 `{"code": "throttled"}` with
Retry-After until the window ends (a client that waits that long gets through). A rate of None
turns that limit off. Rejected credentials count against their IP's `anon` budget too
(ops.auth), so guessing keys is limited like anything anonymous.
"""

import logging
import math
import time

from django.conf import settings
from django.db import DatabaseError
from rest_framework import exceptions
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

from ops import ratestore
from ops.models import ApiKey

log = logging.getLogger(__name__)

OPERATOR, USER, ANON = "operator", "user", "anon"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str | None) -> tuple[int, int] | None:
    """ "600/minute" → (600, 60); DRF's spelling (the unit's first letter counts)."""
    if not rate:
        return None
    count, _, period = rate.partition("/")
    return int(count), _UNITS[period.strip()[0].lower()]


def rate_for(scope: str) -> tuple[int, int] | None:
    return parse_rate(api_settings.DEFAULT_THROTTLE_RATES.get(scope))


def client_ip(request) -> str:
    """The client's address: REMOTE_ADDR, or behind PROXY_HOPS trusted proxies the address the
    outermost of them saw (X-Forwarded-For, counted from the right: entries further left are
    whatever the client sent and cannot be trusted). Throttles, the login lockout and the
    audit log all use this one answer."""
    hops = getattr(settings, "PROXY_HOPS", 0)
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if hops > 0 and forwarded:
        entries = [part.strip() for part in forwarded.split(",") if part.strip()]
        if entries:
            return entries[-min(hops, len(entries))]
    return request.META.get("REMOTE_ADDR") or "unknown"


def client_ip_or_none(request) -> str | None:
    """client_ip for columns that hold an address (django-axes, AXES_CLIENT_IP_CALLABLE): None
    rather than "unknown" when a request has none (test clients, unix sockets)."""
    ip = client_ip(request)
    return None if ip == "unknown" else ip


def principal(request) -> tuple[str, str]:
    """(scope, identity) of a DRF request after authentication."""
    if isinstance(getattr(request, "auth", None), ApiKey):
        return OPERATOR, f"key:{request.auth.pk}"
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and getattr(user, "pk", None) is not None:
        return USER, f"user:{user.pk}"
    return ANON, f"ip:{client_ip(request)}"


def hit(scope: str, ident: str) -> float | None:
    """Count one request; None when it is within the limit, else seconds until the window ends.
    A database that does not answer lets the request through (logged): limits protect the
    service, they must not take it down."""
    rate = rate_for(scope)
    if rate is None:
        return None
    limit, period = rate
    count, remaining = window_count(f"throttle:{scope}:{ident}", period)
    if count is None or count <= limit:
        return None
    return max(remaining, 1.0)


# Ended windows are deleted this often by each process (a later hit would restart them anyway).
PURGE_SECONDS = 600
_next_purge = 0.0


def window_count(name: str, period: int) -> tuple[int | None, float]:
    """Add one to `name`'s counter for its current window of `period` seconds, which starts at
    the first hit after the previous one ended (so a burst is never split by a clock boundary);
    returns (count so far including this hit, seconds until the window ends), count None when
    the database does not answer."""
    global _next_purge
    try:
        count, remaining = ratestore.rate_hit(name=name, period=period)
        if time.monotonic() >= _next_purge:
            _next_purge = time.monotonic() + PURGE_SECONDS
            ratestore.rate_purge()
    except DatabaseError:
        log.warning("rate counter %s: database unavailable", name, exc_info=True)
        return None, 0.0
    return count, remaining


def throttled(wait: float) -> exceptions.Throttled:
    return exceptions.Throttled(
        wait=math.ceil(wait), detail=f"Too many requests; retry in {math.ceil(wait)} s."
    )


class ApiThrottle(BaseThrottle):
    """DEFAULT_THROTTLE_CLASSES: one limit per operator key, per user, per anonymous IP."""

    def allow_request(self, request, view):
        scope, ident = principal(request)
        self._wait = hit(scope, ident)
        return self._wait is None

    def wait(self):
        return math.ceil(self._wait) if self._wait else None


def anon_wait(request) -> int | None:
    """Spend one of the client IP's anonymous requests; seconds to wait when none is left."""
    wait = hit(ANON, f"ip:{client_ip(request)}")
    return math.ceil(wait) if wait is not None else None


def anon_hit_or_raise(request) -> None:
    """A rejected key or token spends its IP's anonymous budget; past it: 429."""
    wait = anon_wait(request)
    if wait is not None:
        raise throttled(wait)
