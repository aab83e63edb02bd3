"""Terra webhook signature check: strict header parse, HMAC-SHA256 over "{t}.{body}", clock window.

Header: `t=<unix seconds>,v1=<64 hex>[,v1=...]`. The timestamp is parsed strictly and must
appear exactly once; the signature entries are not: unknown schemes, v1 values that are not
64 hex digits and items that are not key=value are ignored, and any valid v1 that matches wins
(Stripe and Standard Webhooks do the same, so a sender can add entries during a key or scheme
change without breaking older receivers). Parsing uses ASCII-only patterns on purpose: Python's
int() would accept " 12", "+12", "1_2" and non-ASCII digits.
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
    """(raw timestamp, v1 values), or None when the timestamp is given twice (which one was
    signed would be ambiguous). Items that are not key=value are skipped."""
    timestamp, signatures = None, []
    for part in header.split(","):
        match = _ITEM.fullmatch(part)
        if match is None:
            continue
        key, value = match.groups()
        if key == "t":
            if timestamp is not None:
                return None
            timestamp = value
        elif key == "v1":
            signatures.append(value)
    return timestamp, signatures


def _candidates(signatures: list[str]) -> tuple[list[bytes], str | None]:
    """The v1 values that can be a SHA-256 digest (lower-cased ASCII), or none and the reason:
    length_mismatch when some were hex of the wrong length, else malformed_header."""
    hex_values = [sig for sig in signatures if _HEX.fullmatch(sig)]
    usable = [sig.lower().encode("ascii") for sig in hex_values if len(sig) == _SHA256_HEX_LEN]
    if usable:
        return usable, None
    return [], Reason.LENGTH_MISMATCH if hex_values else Reason.MALFORMED_HEADER


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
    candidates, unusable = _candidates(signatures)
    if unusable:
        return Verdict(False, unusable, timestamp)
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
