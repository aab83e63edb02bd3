"""The `http` action: one request per attempt, with an SSRF guard.

1. Fill the URL template's `{name}` placeholders from the node's input (URL-quoted).
2. Refuse the destination before connecting when any address its host resolves to is private,
   loopback, link-local, multicast, reserved or unspecified — unless `host:port` is listed in
   settings.GRAPHS_HTTP_ALLOWED_HOSTS (the demo lists its local stand-in).
3. Send with redirects off; follow at most MAX_REDIRECTS by hand, re-checking each Location.
4. 2xx → the response JSON (null when the body is empty or not JSON) is the output; 5xx and
   network errors raise (the node's retries apply); 4xx and refusals fail at once.

Headers are literals or {"secret": NAME}, read from settings.GRAPHS_HTTP_SECRETS (filled from
GRAPHS_SECRET_<NAME> environment variables), so definitions never carry credentials.
Known limit: the guard checks the addresses it resolved; a DNS answer that changes between the
check and httpx's own lookup (rebinding) is not pinned.
"""

import ipaddress
import socket
import string
from urllib.parse import quote

import httpx
from django.conf import settings

from graphs.errors import HttpActionRefused
from workflows import NonRetryableError, durations

MAX_REDIRECTS = 5
DEFAULT_TIMEOUT_MS = 30_000

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


def fill_template(template: str, values: dict) -> str:
    out = []
    for literal, field, spec, conversion in string.Formatter().parse(template):
        out.append(literal)
        if field is None:
            continue
        if spec or conversion or not field.isidentifier():
            raise NonRetryableError(f"url placeholder {{{field}}} must be a plain input name")
        if field not in values or values[field] is None:
            raise NonRetryableError(f"url placeholder {{{field}}} has no input value")
        out.append(quote(str(values[field]), safe=""))
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


def call(action: dict, node_input: dict, body) -> object:
    """Run one attempt of an http action; returns the response JSON."""
    url = httpx.URL(fill_template(action["url"], node_input))
    method = action.get("method", "POST")
    timeout = durations.to_ms(action.get("timeout", DEFAULT_TIMEOUT_MS)) / 1000
    headers = _headers(action.get("headers"))
    with httpx.Client(transport=_transport, timeout=timeout, follow_redirects=False) as client:
        for _ in range(MAX_REDIRECTS + 1):
            try:
                check_destination(url)
            except HttpActionRefused as exc:
                raise NonRetryableError(str(exc)) from exc
            send_body = body is not None and method not in ("GET", "DELETE")
            response = client.request(
                method, url, headers=headers, json=body if send_body else None
            )
            if response.is_redirect and response.headers.get("location"):
                url = url.join(response.headers["location"])
                if response.status_code in (301, 302, 303):
                    method, body = "GET", None
                continue
            return _answer(response)
    raise NonRetryableError(f"more than {MAX_REDIRECTS} redirects")


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
