"""Terra webhook signature check: strict header parse, HMAC-SHA256 over "{t}.{body}", clock window.

Header: `t=<unix seconds>,v1=<64 hex>[,v1=...]`; unknown schemes are ignored and any matching v1
wins. Parsing uses ASCII-only patterns on purpose: Python's int() would accept " 12", "+12",
"1_2" and non-ASCII digits, and a lenient parse is a second signature format nobody reviewed.
"""

import hashlib
import hmac
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings

HEADER_NAMES = ("Terra-Signature", "X-Terra-Signature")

# re.ASCII keeps \d and friends out of play; the classes below are spelled out anyway.
_ITEM = re.compile(r"([a-z0-9]+)=([^,]*)", re.ASCII)
_TIMESTAMP = re.compile(r"[0-9]{1,12}", re.ASCII)
_HEX = re.compile(r"[0-9a-fA-F]+", re.ASCII)
_SHA256_HEX_LEN = 64


class Reason:
    MISSING_HEADER = "missing_header"
    MALFORMED_HEADER = "malformed_header"
    BAD_TIMESTAMP = "bad_timestamp"
    STALE = "stale"
    LENGTH_MISMATCH = "length_mismatch"
    SIGNATURE_MISMATCH = "signature_mismatch"


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str | None = None
    timestamp: int | None = None


def signature_header(headers) -> str | None:
    """The signature header's value from a Django HttpHeaders (or any case-insensitive map)."""
    for name in HEADER_NAMES:
        value = headers.get(name)
        if value is not None:
            return value
    return None


def _parse(header: str) -> tuple[str | None, list[str]] | None:
    """(raw timestamp, v1 values) or None when the header is not a comma list of key=value."""
    timestamp, signatures = None, []
    for part in header.split(","):
        match = _ITEM.fullmatch(part)
        if match is None:
            return None
        key, value = match.groups()
        if key == "t":
            if timestamp is not None:
                return None  # two timestamps: which one was signed is ambiguous
            timestamp = value
        elif key == "v1":
            signatures.append(value)
    return timestamp, signatures


def signature_verify(
    *,
    header: str | None,
    body: bytes | bytearray,
    secrets: Iterable[str] | None = None,
    now: float | None = None,
    tolerance: int | None = None,
) -> Verdict:
    """Check one delivery. `now` (unix seconds) and `secrets` are injectable for tests."""
    if header is None or header == "":
        return Verdict(False, Reason.MISSING_HEADER)
    parsed = _parse(header)
    if parsed is None:
        return Verdict(False, Reason.MALFORMED_HEADER)
    raw_timestamp, signatures = parsed
    if raw_timestamp is None or not signatures:
        return Verdict(False, Reason.MALFORMED_HEADER)
    if not _TIMESTAMP.fullmatch(raw_timestamp):
        return Verdict(False, Reason.BAD_TIMESTAMP)
    timestamp = int(raw_timestamp)
    window = settings.TERRA_SIGNATURE_TOLERANCE_SECONDS if tolerance is None else tolerance
    current = time.time() if now is None else now
    if abs(current - timestamp) > window:
        return Verdict(False, Reason.STALE, timestamp)
    if not all(_HEX.fullmatch(sig) for sig in signatures):
        return Verdict(False, Reason.MALFORMED_HEADER, timestamp)
    candidates = [sig.lower().encode("ascii") for sig in signatures]
    if all(len(sig) != _SHA256_HEX_LEN for sig in candidates):
        return Verdict(False, Reason.LENGTH_MISMATCH, timestamp)
    keys = list(settings.TERRA_WEBHOOK_SECRETS if secrets is None else secrets)
    prefix = f"{raw_timestamp}.".encode("ascii")
    for secret in keys:
        mac = hmac.new(secret.encode(), prefix, hashlib.sha256)
        mac.update(body)  # no "{t}.{body}" concatenation: bodies reach 50 MB
        expected = mac.hexdigest().encode("ascii")
        for candidate in candidates:
            if hmac.compare_digest(expected, candidate):
                return Verdict(True, None, timestamp)
    return Verdict(False, Reason.SIGNATURE_MISMATCH, timestamp)


def signature_header_value(body: bytes, *, secret: str, timestamp: int | None = None) -> str:
    """Sign a body the way Terra does (the simulator, the demo command and the bench use it)."""
    t = int(time.time()) if timestamp is None else timestamp
    mac = hmac.new(secret.encode(), f"{t}.".encode("ascii"), hashlib.sha256)
    mac.update(body)
    return f"t={t},v1={mac.hexdigest()}"
