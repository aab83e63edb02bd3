"""Request limits for the API, shared by every process through Django's cache (Redis when
REDIS_URL is set, else the database cache table `vitalflow_cache` that migrate creates).

One throttle, three principals, each with its rate in REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]:
an operator key (`operator`, per key), a user token or session (`user`, per user), anything
else (`anon`, per client IP). Windows counted with cache.add + cache.incr (atomic INCR on Redis):
N requests per window, then 429 `{"code": "throttled"}` with Retry-After until the
window ends. A rate of None turns that limit off. Rejected credentials count against their
IP's `anon` budget too (ops.auth), so guessing keys is limited like anything anonymous.
"""

import logging
import math
import time

from django.conf import settings
from django.core.cache import cache
from rest_framework import exceptions
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

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


def hit(scope: str, ident: str, *, now: float | None = None) -> float | None:
    """Count one request; None when it is within the limit, else seconds until the window ends.
    A cache that does not answer lets the request through (logged): limits protect the
    service, they must not take it down."""
    rate = rate_for(scope)
    if rate is None:
        return None
    limit, period = rate
    now = time.time() if now is None else now
    count, window_ends = window_count(f"throttle:{scope}:{ident}", period, now=now)
    if count is None or count <= limit:
        return None
    return max(window_ends - now, 1.0)


def window_count(name: str, period: int, *, now: float | None = None) -> tuple[int | None, float]:
    """Add one to `name`'s counter for its current window of `period` seconds, which starts at
    the first hit after the previous one ended (so a burst is never split by a clock boundary);
    returns (count so far, when the window ends), count None when the cache does not answer."""
    now = time.time() if now is None else now
    key = f"{name}:{period}"
    try:
        cache.add(f"{key}:start", now, timeout=period)
        cache.add(key, 0, timeout=period)
        try:
            count = cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, 1, timeout=period)
            count = 1
        started = cache.get(f"{key}:start", now)
    except Exception:
        log.warning("rate counter %s: cache unavailable", name, exc_info=True)
        return None, now
    return count, started + period


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
