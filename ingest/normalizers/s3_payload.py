"""`s3_payload` deliveries (Terra's ping mode): the webhook carries a pre-signed, time-limited
`url` instead of the data (terra-openapi-v2.yaml, S3PayloadEvent: "download the JSON from `url`
before it expires and process it exactly as the equivalent inline data event").

The consumer downloads it and records the body as a raw event of its own, as if Terra had
delivered it inline (same request id and ordering time as the ping, deduplicated by its bytes),
which then goes through the queue like any other delivery; the ping row ends
`skipped:s3_payload:fetched:<raw event id>`.

The URL is fetched only when it is HTTPS, its host is one of TERRA_S3_PAYLOAD_HOSTS (exact names
or `.suffix` patterns), every address the host resolves to is public (no private, loopback,
link-local … targets: the URL is attacker-controlled if a signing secret ever leaks), redirects
are not followed, the body is at most TERRA_WEBHOOK_MAX_BYTES, and the ping has not expired
(received_at + expires_in). A refusal or an expired link ends `skipped:unmappable:<reason>`
(visible in the DLQ filters); a network error or a 5xx raises, so the consumer retries.
"""

import ipaddress
import socket
from datetime import timedelta

import httpx
from django.conf import settings
from django.utils import timezone

from ingest.models import RawEvent
from ingest.registry import NormalizeResult, register

TIMEOUT = httpx.Timeout(30.0, connect=5.0)

_transport: httpx.BaseTransport | None = None  # tests mock the download at the HTTP boundary
_bucket: tuple[str, httpx.BaseTransport] | None = None  # (host, transport) of set_bucket_transport
_resolver = socket.getaddrinfo


class Refused(Exception):
    """The ping cannot be fetched and never will be: the reason becomes skipped:unmappable."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def set_transport(transport: httpx.BaseTransport | None) -> None:
    global _transport
    _transport = transport


def set_bucket_transport(host: str | None, transport: httpx.BaseTransport | None = None) -> None:
    """Downloads from `host` go through `transport`, never looked up (demo mode's bucket)."""
    global _bucket
    _bucket = (host, transport) if host and transport else None


def host_allowed(host: str) -> bool:
    host = host.lower().rstrip(".")
    for pattern in settings.TERRA_S3_PAYLOAD_HOSTS:
        pattern = pattern.lower()
        if host == pattern.lstrip(".") or (pattern.startswith(".") and host.endswith(pattern)):
            return True
    return False


def _is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def _simulated(url: httpx.URL) -> bool:
    """The bucket set_bucket_transport names: served by its transport, never looked up."""
    return _bucket is not None and url.host == _bucket[0]


def _client_transport(url: httpx.URL) -> httpx.BaseTransport | None:
    if _transport is not None:
        return _transport
    return _bucket[1] if _simulated(url) else None


def check_url(raw: object) -> httpx.URL:
    """The URL to fetch, or Refused with the reason."""
    if not isinstance(raw, str) or not raw:
        raise Refused("s3_payload_no_url")
    try:
        url = httpx.URL(raw)
    except httpx.InvalidURL:
        raise Refused("s3_payload_bad_url") from None
    if url.scheme != "https" or not url.host:
        raise Refused("s3_payload_not_https")
    if not host_allowed(url.host):
        raise Refused("s3_payload_host_not_allowed")
    if _simulated(url):
        return url
    try:
        addresses = {str(ipaddress.ip_address(url.host))}
    except ValueError:
        try:
            infos = _resolver(url.host, url.port or 443, type=socket.SOCK_STREAM)
        except OSError as exc:  # DNS trouble is transient: the consumer retries
            raise ConnectionError(f"cannot resolve {url.host}: {exc}") from exc
        addresses = {info[4][0] for info in infos}
    if not addresses or not all(_is_public(a) for a in addresses):
        raise Refused("s3_payload_private_address")
    return url


def expires_at(raw_event: RawEvent, payload: dict):
    seconds = payload.get("expires_in")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        raise Refused("s3_payload_no_expiry")
    return raw_event.received_at + timedelta(seconds=min(seconds, 7 * 86400))


def download(url: httpx.URL, *, limit: int) -> bytes:
    """The body, streamed and capped at `limit` bytes; Refused for 4xx and oversize, httpx
    errors (and 5xx) raise for a retry."""
    client = httpx.Client(transport=_client_transport(url), timeout=TIMEOUT, follow_redirects=False)
    with client, client.stream("GET", url) as response:
        if response.status_code >= 500:
            response.raise_for_status()
        if response.status_code != 200:
            raise Refused(f"s3_payload_http_{response.status_code}")
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise Refused("s3_payload_too_large")
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > limit:
                raise Refused("s3_payload_too_large")
            chunks.append(chunk)
    return b"".join(chunks)


@register("s3_payload")
def s3_payload_fetch(raw_event: RawEvent) -> NormalizeResult:
    from ingest.deliveries import raw_event_record_fetched
    from ingest.envelope import envelope_read
    from ingest.payload import Unparseable

    payload = raw_event.payload or {}
    try:
        if timezone.now() > expires_at(raw_event, payload):
            raise Refused("s3_payload_expired")
        url = check_url(payload.get("url"))
        body = download(url, limit=settings.TERRA_WEBHOOK_MAX_BYTES)
    except Refused as refused:
        return NormalizeResult(ok=True, skipped=f"unmappable:{refused.reason}")
    try:
        envelope = envelope_read(body)
    except Unparseable as exc:
        envelope, unparseable = None, f"unparseable:{exc.reason}"
    else:
        unparseable = None
        if envelope.event_type == "s3_payload":  # a ping pointing at a ping: never loop
            return NormalizeResult(ok=True, skipped="unmappable:s3_payload_nested")
    recorded = raw_event_record_fetched(
        body=body, envelope=envelope, skipped=unparseable, source=raw_event
    )
    fetched = recorded.raw_event_id if recorded.raw_event_id is not None else "duplicate"
    return NormalizeResult(
        ok=True,
        skipped=f"s3_payload:fetched:{fetched}",
        detail={"bytes": len(body), "type": recorded.event_type, "host": url.host},
    )
