"""Terra signature verification: the shared test vector, every failure reason, clock edges,
several v1 values, secret rotation, and the strict parse — through signature_verify and through
the real endpoint."""

import hashlib
import hmac

import pytest

from ingest.models import RawEvent
from ingest.terra.signature import signature_verify
from tests.conftest import load_fixture, sign

NOW = 1_780_000_000
BODY = b'{"type":"healthcheck"}'


def mac(body: bytes, t, secret: str = "test-secret") -> str:
    return hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()


def verify(header, body=BODY, *, now=NOW, secrets=("test-secret",)):
    return signature_verify(header=header, body=body, secrets=secrets, now=now)


def test_terra_signature_test_vector_verifies_with_an_injected_clock():
    vector = load_fixture("signature_test_vector.json")
    verdict = signature_verify(
        header=vector["header_terra_signature"],
        body=vector["raw_body"].encode(),
        secrets=[vector["signing_secret"]],
        now=12345678 + 10,
    )
    assert verdict.ok
    assert verdict.timestamp == 12345678


def test_terra_signature_test_vector_negative_cases_are_rejected():
    vector = load_fixture("signature_test_vector.json")
    for case in vector["negative_cases"]:
        verdict = signature_verify(
            header=case["header_terra_signature"],
            body=case["raw_body"].encode(),
            secrets=[case["signing_secret"]],
            now=1234,
        )
        assert not verdict.ok
        assert verdict.reason == "malformed_header"


def test_test_vector_is_stale_against_the_real_clock():
    vector = load_fixture("signature_test_vector.json")
    verdict = signature_verify(
        header=vector["header_terra_signature"],
        body=vector["raw_body"].encode(),
        secrets=[vector["signing_secret"]],
    )
    assert verdict.reason == "stale"


@pytest.mark.parametrize(
    ("offset", "ok"), [(-299, True), (-301, False), (299, True), (301, False), (0, True)]
)
def test_clock_edges(offset, ok):
    t = NOW + offset
    verdict = verify(f"t={t},v1={mac(BODY, t)}")
    assert verdict.ok is ok
    if not ok:
        assert verdict.reason == "stale"


def test_any_matching_v1_wins_and_unknown_schemes_are_ignored():
    good = mac(BODY, NOW)
    header = f"t={NOW},v0=abc,v1={'0' * 64},v1={good},scheme2=zzz"
    assert verify(header).ok


@pytest.mark.parametrize(
    "extra",
    ["v1=", "v1=xyz", "v1=" + "a" * 63, "v1=" + "a" * 65, "garbage", "v1=" + "é" * 64, " v1=x"],
)
@pytest.mark.parametrize("valid_first", [True, False])
def test_a_valid_v1_verifies_whatever_other_entries_hold(extra, valid_first):
    # Seen: a valid signature next to an extra malformed `v1=` entry got 401 malformed_header.
    good = f"v1={mac(BODY, NOW)}"
    entries = [good, extra] if valid_first else [extra, good]
    assert verify(",".join([f"t={NOW}", *entries])).ok


def test_rotation_accepts_every_configured_secret():
    header = f"t={NOW},v1={mac(BODY, NOW, 'old-secret')}"
    assert verify(header, secrets=["new-secret", "old-secret"]).ok
    assert verify(header, secrets=["new-secret"]).reason == "signature_mismatch"


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (None, "missing_header"),
        ("", "missing_header"),
        ("garbage", "malformed_header"),
        (f"t={NOW}", "malformed_header"),
        ("v1=" + "a" * 64, "malformed_header"),
        (f"t={NOW},t={NOW},v1={'a' * 64}", "malformed_header"),
        (f"t={NOW}, v1={'a' * 64}", "malformed_header"),
        (f"t={NOW},v1=xyz", "malformed_header"),
        (f"t= {NOW},v1={'a' * 64}", "bad_timestamp"),
        (f"t=+{NOW},v1={'a' * 64}", "bad_timestamp"),
        (f"t={NOW}.5,v1={'a' * 64}", "bad_timestamp"),
        ("t=1_780_000_000,v1=" + "a" * 64, "bad_timestamp"),
        ("t=١٧٨٠٠٠٠٠٠٠,v1=" + "a" * 64, "bad_timestamp"),  # Arabic-Indic digits: int() takes them
        (f"t=-{NOW},v1={'a' * 64}", "bad_timestamp"),
        ("t=,v1=" + "a" * 64, "bad_timestamp"),
        (f"t={NOW},v1={'a' * 63}", "length_mismatch"),
        (f"t={NOW},v1={'a' * 66}", "length_mismatch"),
        (f"t={NOW},v1={'a' * 64}", "signature_mismatch"),
    ],
)
def test_failure_reasons(header, reason):
    verdict = verify(header)
    assert not verdict.ok
    assert verdict.reason == reason


def test_uppercase_hex_digest_is_accepted():
    assert verify(f"t={NOW},v1={mac(BODY, NOW).upper()}").ok


def test_signature_covers_the_exact_bytes():
    header = f"t={NOW},v1={mac(BODY, NOW)}"
    assert verify(header, body=BODY + b" ").reason == "signature_mismatch"


# --- through the endpoint ------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("make_header", "reason"),
    [
        (lambda body: None, "missing_header"),
        (lambda body: "nonsense", "malformed_header"),
        (lambda body: "t=+1,v1=" + "a" * 64, "bad_timestamp"),
        (lambda body: sign(body, timestamp=1000), "stale"),
        (lambda body: sign(body)[:-2], "length_mismatch"),
        (lambda body: sign(body, secret="wrong"), "signature_mismatch"),
    ],
)
def test_endpoint_answers_401_with_the_reason_and_stores_nothing(client, make_header, reason):
    body = b'{"type": "daily", "data": []}'
    header = make_header(body)
    extra = {} if header is None else {"HTTP_TERRA_SIGNATURE": header}
    response = client.generic(
        "POST", "/webhook/terra", body, content_type="application/json", **extra
    )
    assert response.status_code == 401
    assert response.json()["code"] == "invalid_signature"
    assert response.json()["reason"] == reason
    assert response.json()["message"]
    assert not RawEvent.objects.exists()


@pytest.mark.django_db
def test_signature_is_checked_before_the_body_is_parsed(client):
    response = client.generic(
        "POST",
        "/webhook/terra",
        b"not json at all",
        content_type="application/json",
        HTTP_TERRA_SIGNATURE=sign(b"other body"),
    )
    assert response.status_code == 401
    assert response.json()["reason"] == "signature_mismatch"


@pytest.mark.django_db
def test_x_terra_signature_header_is_accepted(client, sync_queue):
    body = b'{"type": "healthcheck"}'
    response = client.generic(
        "POST",
        "/webhook/terra",
        body,
        content_type="application/json",
        HTTP_X_TERRA_SIGNATURE=sign(body),
    )
    assert response.status_code == 200


@pytest.mark.django_db
def test_endpoint_accepts_a_rotated_secret(deliver, settings):
    settings.TERRA_WEBHOOK_SECRETS = ["new-secret", "old-secret"]
    assert deliver({"type": "healthcheck"}, secret="old-secret").status_code == 200
    assert deliver({"type": "healthcheck", "n": 2}, secret="new-secret").status_code == 200
    assert deliver({"type": "healthcheck", "n": 3}, secret="other").status_code == 401
