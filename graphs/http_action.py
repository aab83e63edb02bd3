"""The `http` action: one request per attempt (plus the waits a server asks for), with an SSRF
guard and an Idempotency-Key.

1. Fill the URL template's `{name}` placeholders from the node's input (URL-quoted).
2. Refuse the destination before connecting when any address its host resolves to is private,
   loopback, link-local, multicast, reserved or unspecified — unless `host:port` is listed in
   settings.GRAPHS_HTTP_ALLOWED_HOSTS (the demo lists its local stand-in).
3. Send with redirects off; follow at most MAX_REDIRECTS by hand, re-checking each Location.
   Every request (retries and redirects too) carries the execution's Idempotency-Key.
4. 429 and 503 with a Retry-After (seconds or an HTTP date) that the node's timeout still has
   room for: wait that long and send again, within this attempt (at most MAX_WAITS times);
   otherwise they raise like a 5xx and the node's retries (its backoff) apply.
5. 2xx → the response JSON (null when the body is empty or not JSON) is the output; 5xx, 429
   and network errors raise (the node's retries apply); other 4xx and refusals fail at once.

Headers are literals or {"secret": NAME}, read from settings.GRAPHS_HTTP_SECRETS (filled from
GRAPHS_SECRET_<NAME> environment variables), so definitions never carry credentials.
Known limit: the guard checks the addresses it resolved; a DNS answer that changes between the
check and httpx's own lookup (rebinding) is not pinned.
"""

import hashlib
import ipaddress
import socket
import string
import time
from urllib.parse import quote

import httpx
from django.conf import settings

from graphs.errors import HttpActionRefused, RateLimited
from ops import pacing
from ops.pacing import retry_after_seconds
from workflows import NonRetryableError, durations

MAX_REDIRECTS = 5
DEFAULT_TIMEOUT_MS = 30_000
MAX_WAITS = 5  # Retry-After waits within one attempt; then the node's own retries take over
WAIT_STATUSES = (429, 503)
KEY_HEADER = "Idempotency-Key"
KEY_MAX = 255

_transport: httpx.BaseTransport | None = None
_resolver = socket.getaddrinfo


def set_transport(transport: httpx.BaseTransport | None) -> None:
    """Tests answer requests with an httpx.MockTransport; None restores the network."""
    global _transport
    _transport = transport


def set_resolver(resolver) -> None:
    """Tests resolve names without DNS; None restores socket.getaddrinfo."""
    global _resolver
    _resolver = resolver or socket.getaddrinfo


def idempotency_key(*, run_id: str, engine_run: int, path: str, node: str) -> str:
    """The key of one execution of a node: the same for every retry of it (attempts and
    Retry-After waits), new for another execution — a loop's next visit is another token path,
    a restarted run another engine run. 32 hex characters of a sha256."""
    material = f"{run_id}\n{engine_run}\n{path}\n{node}".encode()
    return hashlib.sha256(material).hexdigest()[:32]


def node_key(action: dict, node_input: dict, default: str) -> str:
    """The node's own `idempotency_key` template filled from its input, else `default`."""
    template = action.get("idempotency_key")
    if template is None:
        return default
    key = fill_template(template, node_input, quoted=False)
    if not key or len(key) > KEY_MAX or not key.isascii() or not key.isprintable():
        raise NonRetryableError(
            f"idempotency_key {key[:40]!r} must be 1-{KEY_MAX} printable ASCII characters"
        )
    return key


def fill_template(template: str, values: dict, *, quoted: bool = True) -> str:
    out = []
    for literal, field, spec, conversion in string.Formatter().parse(template):
        out.append(literal)
        if field is None:
            continue
        if spec or conversion or not field.isidentifier():
            raise NonRetryableError(f"url placeholder {{{field}}} must be a plain input name")
        if field not in values or values[field] is None:
            raise NonRetryableError(f"url placeholder {{{field}}} has no input value")
        text = str(values[field])
        out.append(quote(text, safe="") if quoted else text)
    return "".join(out)


def _allowed_hosts() -> set[str]:
    return {h.strip().lower() for h in getattr(settings, "GRAPHS_HTTP_ALLOWED_HOSTS", []) if h}


def _is_public(address: str) -> bool:
    """Globally routable unicast only. `is_global` also refuses the shared address space
    (100.64.0.0/10, where some clouds serve instance metadata); IPv6 forms that carry an IPv4
    address (mapped, 6to4, Teredo) are judged by that address; site-local fec0::/10 is refused."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is not None:
            return _is_public(str(embedded))
        if ip.is_site_local:
            return False
    return ip.is_global and not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
    )


def check_destination(url: httpx.URL) -> None:
    """Raise HttpActionRefused unless every address of the URL's host is public (or allowed)."""
    if url.scheme not in ("http", "https") or not url.host:
        raise HttpActionRefused(f"refused {url}: only http(s) URLs with a host")
    port = url.port or (443 if url.scheme == "https" else 80)
    if f"{url.host.lower()}:{port}" in _allowed_hosts():
        return
    try:
        addresses = {str(ipaddress.ip_address(url.host))}  # a literal address: no lookup
    except ValueError:
        try:
            infos = _resolver(url.host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ConnectionError(f"cannot resolve {url.host}: {exc}") from exc
        addresses = {info[4][0] for info in infos}
    for address in sorted(addresses):
        if not _is_public(address):
            raise HttpActionRefused(
                f"refused {url.host}:{port}: it resolves to the non-public address {address} "
                "(list host:port in GRAPHS_HTTP_ALLOWED_HOSTS to allow it)"
            )


def _headers(raw: dict) -> dict:
    secrets = getattr(settings, "GRAPHS_HTTP_SECRETS", {}) or {}
    headers = {}
    for name, value in (raw or {}).items():
        if isinstance(value, dict):
            secret = secrets.get(value["secret"])
            if secret is None:
                raise NonRetryableError(f"header {name}: secret {value['secret']!r} is not set")
            value = secret
        headers[name] = value
    return headers


def call(
    action: dict,
    node_input: dict,
    body,
    *,
    idempotency_key: str | None = None,
    budget_ms: int | None = None,
) -> object:
    """Run one attempt of an http action; returns the response JSON. `budget_ms`: what the
    node's timeout allows this attempt, the bound on Retry-After waits."""
    url = httpx.URL(fill_template(action["url"], node_input))
    method = action.get("method", "POST")
    timeout_ms = durations.to_ms(action.get("timeout", DEFAULT_TIMEOUT_MS))
    headers = _headers(action.get("headers"))
    if idempotency_key and KEY_HEADER.lower() not in {h.lower() for h in headers}:
        headers[KEY_HEADER] = idempotency_key  # a header the node sets itself wins
    deadline = None if budget_ms is None else time.monotonic() + budget_ms / 1000
    with httpx.Client(
        transport=_transport, timeout=timeout_ms / 1000, follow_redirects=False
    ) as client:
        waited = 0
        while True:
            response = _send(client, method, url, headers, body)
            if response.status_code not in WAIT_STATUSES:
                return _answer(response)
            wait = retry_after_seconds(response.headers.get("retry-after"))
            # Room for the wait and one more request inside the node's timeout; without a
            # budget (a direct call) nothing is waited for.
            room = -1.0 if deadline is None else deadline - time.monotonic() - timeout_ms / 1000
            if wait is None or wait > room or waited == MAX_WAITS:
                raise _unavailable(response, wait)
            time.sleep(wait)
            waited += 1


def _send(client: httpx.Client, method: str, url: httpx.URL, headers: dict, body):
    """One request and the redirects it leads to, each destination checked first."""
    for _ in range(MAX_REDIRECTS + 1):
        try:
            check_destination(url)
        except HttpActionRefused as exc:
            raise NonRetryableError(str(exc)) from exc
        pace(url, max_wait=client.timeout.read or 30.0)
        send_body = body is not None and method not in ("GET", "DELETE")
        response = client.request(method, url, headers=headers, json=body if send_body else None)
        if response.is_redirect and response.headers.get("location"):
            url = url.join(response.headers["location"])
            if response.status_code in (301, 302, 303):
                method, body = "GET", None
            continue
        return response
    raise NonRetryableError(f"more than {MAX_REDIRECTS} redirects")


def pace(url: httpx.URL, *, max_wait: float) -> None:
    """The outbound rate limit per host, shared by every process (ops.pacing): before each
    request, retries, waits and redirects included. A slot further than `max_wait` away is a
    retryable RateLimited, so the node's backoff applies."""
    rate = settings.GRAPHS_HTTP_RATE_PER_HOST
    if not rate:
        return
    try:
        pacing.acquire(f"graphs.http:{url.host}", per_second=float(rate), max_wait=max_wait)
    except pacing.PaceExceeded as exc:
        raise RateLimited(
            f"our own pace for {url.host} is full; again in {exc.retry_after:.1f} s"
        ) from exc


def _unavailable(response: httpx.Response, wait: float | None) -> Exception:
    """A 429 or 503 the attempt does not wait out: retryable, so the node's backoff applies."""
    host = response.request.url.host
    why = (
        ""
        if wait is None
        else f" (Retry-After {wait:.0f} s is more than the node's timeout leaves)"
    )
    if response.status_code == 429:
        return RateLimited(f"HTTP 429 from {host}{why}")
    return ConnectionError(f"HTTP {response.status_code} from {host}{why}")


def _answer(response: httpx.Response):
    if response.status_code >= 500:
        raise ConnectionError(f"HTTP {response.status_code} from {response.request.url.host}")
    if response.status_code >= 400:
        raise NonRetryableError(f"HTTP {response.status_code} from {response.request.url.host}")
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return None
