"""`s3_payload` deliveries (Terra's ping mode): the webhook carries a pre-signed, time-limited `url`
instead of the data; the consumer downloads it, outside any transaction and within a deadline,
and records the body as a delivery of its own. docs/ingest.md › Ping mode has the rules."""

import ipaddress
import socket
import time
from dataclasses import dataclass
from datetime import timedelta

import httpx
from django.conf import settings
from django.utils import timezone

from ingest.models import RawEvent
from ingest.registry import NormalizeResult, register
from ingest.store import consumer as store

_transport: httpx.BaseTransport | None = None  # tests answer at the HTTP boundary
_resolver = socket.getaddrinfo
# A bucket served in process (demo mode's simulator): (host, transport), never looked up.
_simulated: tuple[str, httpx.BaseTransport] | None = None
# Each read waits at most this long; the whole download at most TERRA_S3_PAYLOAD_DEADLINE_SECONDS.
_STEP = httpx.Timeout(5.0)


class Refused(Exception):
    """The ping cannot be fetched and never will be: the reason becomes skipped:unmappable."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class TooSlow(Exception):
    """The download did not finish within its deadline (a transient failure: retried)."""


def set_transport(transport: httpx.BaseTransport | None) -> None:
    global _transport
    _transport = transport


def set_simulated_bucket(host: str | None, transport: httpx.BaseTransport | None = None) -> None:
    """Serve `host` from `transport` without a DNS look-up (demo mode); None removes it."""
    global _simulated
    _simulated = (host, transport) if host and transport is not None else None


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


@dataclass(frozen=True)
class Target:
    url: httpx.URL
    address: str | None  # the checked address to connect to; None: a simulated bucket


def check_url(raw: object) -> Target:
    """The URL and the one address to connect to, or Refused with the reason. The address
    checked here is the address connected to: no second look-up between check and connect."""
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
    if _simulated is not None and url.host == _simulated[0]:
        return Target(url, None)
    try:
        addresses = [str(ipaddress.ip_address(url.host))]
    except ValueError:
        try:
            infos = _resolver(url.host, url.port or 443, type=socket.SOCK_STREAM)
        except OSError as exc:  # DNS trouble is transient: the consumer retries
            raise ConnectionError(f"cannot resolve {url.host}: {exc}") from exc
        addresses = [info[4][0] for info in infos]
    if not addresses or not all(_is_public(a) for a in addresses):
        raise Refused("s3_payload_private_address")
    return Target(url, addresses[0])


def expires_at(raw_event: RawEvent, payload: dict):
    seconds = payload.get("expires_in")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        raise Refused("s3_payload_no_expiry")
    return raw_event.received_at + timedelta(seconds=min(seconds, 7 * 86400))


def _request(client: httpx.Client, target: Target):
    if target.address is None:
        return client.stream("GET", target.url)
    # Connect to the checked address; the host name still goes in Host and in TLS (SNI and the
    # certificate's name), as httpx documents the sni_hostname extension.
    pinned = target.url.copy_with(host=target.address)
    headers = {"Host": target.url.netloc.decode("ascii")}
    return client.stream(
        "GET", pinned, headers=headers, extensions={"sni_hostname": target.url.host}
    )


def download(target: Target, *, limit: int, deadline: float) -> bytes:
    """The body, streamed and capped at `limit` bytes, within `deadline` seconds from the first
    byte sent; Refused for 4xx and oversize; TooSlow past the deadline; httpx errors (and 5xx)
    raise for a retry."""
    began = time.monotonic()
    transport = _transport or (_simulated[1] if target.address is None and _simulated else None)
    client = httpx.Client(transport=transport, timeout=_STEP, follow_redirects=False)
    with client, _request(client, target) as response:
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
            if time.monotonic() - began > deadline:
                raise TooSlow(f"s3_payload_too_slow: {size} bytes in {deadline:.0f} s")
    return b"".join(chunks)


# A deferred ping (its bucket is busy with another worker's download) is tried again this soon.
HOST_BUSY_WAIT = timedelta(seconds=5)


@register("s3_payload", in_transaction=False)
def s3_payload_fetch(raw_event: RawEvent) -> NormalizeResult:
    """Download the ping's URL once per bucket at a time (a slow or hostile bucket costs at most
    one worker for at most the deadline), then record what it held."""
    payload = raw_event.payload or {}
    try:
        if timezone.now() > expires_at(raw_event, payload):
            raise Refused("s3_payload_expired")
        target = check_url(payload.get("url"))
    except Refused as refused:
        return NormalizeResult(ok=True, skipped=f"unmappable:{refused.reason}")
    deadline = float(settings.TERRA_S3_PAYLOAD_DEADLINE_SECONDS)
    host = target.url.host
    if not store.download_slot_take(host, seconds=deadline + _STEP.read + 5):
        return NormalizeResult(ok=False, error=f"s3_payload_host_busy:{host}"[:200], defer=True)
    try:
        body = download(target, limit=settings.TERRA_WEBHOOK_MAX_BYTES, deadline=deadline)
    except Refused as refused:
        return NormalizeResult(ok=True, skipped=f"unmappable:{refused.reason}")
    finally:
        store.download_slot_give_back(host)
    return _record(raw_event, body, host)


def _record(raw_event: RawEvent, body: bytes, host: str) -> NormalizeResult:
    from ingest.recording import raw_event_record_fetched
    from ingest.terra.envelope import envelope_read
    from ingest.terra.payload import Unparseable

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
        detail={"bytes": len(body), "type": recorded.event_type, "host": host},
    )
