"""`s3_payload` pings (Terra's ping mode): the consumer downloads the referenced
payload and it is processed as if delivered inline; URLs that are not HTTPS on Terra's hosts,
that resolve to private or loopback addresses, that are too big or expired are refused and say
why. Terra's bucket is mocked at the HTTP boundary (httpx.MockTransport)."""

import hashlib
import json
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from ingest.consumer import raw_event_consume
from ingest.models import Activity, DownloadSlot, RawEvent, RawEventState
from ingest.normalizers import s3_payload

pytestmark = pytest.mark.django_db

URL = "https://terra-payload-bucket.s3.eu-west-2.amazonaws.com/payloads/40f7b0e1/a.json?X-Amz-Signature=x"


def ping(url=URL, expires_in=300) -> dict:
    return {"type": "s3_payload", "status": "success", "url": url, "expires_in": expires_in}


@pytest.fixture
def bucket(monkeypatch):
    """Terra's bucket: serves `files[path]` (bytes or an httpx.Response); the host resolves to a
    public address unless a test says otherwise."""
    files: dict[str, object] = {}
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        found = files.get(request.url.path)
        if isinstance(found, httpx.Response):
            return found
        return httpx.Response(200, content=found) if found else httpx.Response(404)

    s3_payload.set_transport(httpx.MockTransport(handler))
    addresses = {"value": ["52.95.148.1"]}
    monkeypatch.setattr(
        s3_payload,
        "_resolver",
        lambda host, port, type=0: [(2, 1, 6, "", (a, port)) for a in addresses["value"]],
    )
    yield {"files": files, "seen": seen, "addresses": addresses}
    s3_payload.set_transport(None)


def activity_body(fixture_payload) -> bytes:
    return json.dumps(fixture_payload("activity.json", reference="alice")).encode()


def consume_ping(post, payload, **kwargs) -> RawEvent:
    response = post(payload, **kwargs)
    assert response.status_code == 200
    return RawEvent.objects.get(pk=response.json()["raw_event_id"])


def test_the_payload_is_downloaded_and_processed_as_if_delivered(
    post, bucket, fixture_payload, alice
):
    body = activity_body(fixture_payload)
    bucket["files"]["/payloads/40f7b0e1/a.json"] = body
    row = consume_ping(post, ping(), headers={"HTTP_X_REQUEST_ID": "req-ping"})
    row.refresh_from_db()
    fetched = RawEvent.objects.exclude(pk=row.pk).get()
    assert row.state == RawEventState.SKIPPED
    assert row.process_error == f"skipped:s3_payload:fetched:{fetched.pk}"
    assert fetched.event_type == "activity"
    assert fetched.request_id == "req-ping" and fetched.ordered_at == row.ordered_at
    assert fetched.dedup_key == hashlib.sha256(body).hexdigest()  # the bytes, kept exactly
    assert fetched.state == RawEventState.PROCESSED  # queued and consumed like a delivery
    assert Activity.objects.filter(user=alice).exists()
    # The address checked is the address connected to; the host name goes in Host and TLS.
    sent = bucket["seen"][0]
    assert str(sent.url) == URL.replace(httpx.URL(URL).host, "52.95.148.1")
    assert sent.headers["host"] == httpx.URL(URL).host
    assert sent.extensions["sni_hostname"] == httpx.URL(URL).host


def test_the_same_payload_fetched_twice_is_a_duplicate(post, bucket, fixture_payload, alice):
    bucket["files"]["/payloads/40f7b0e1/a.json"] = activity_body(fixture_payload)
    consume_ping(post, ping())
    second = consume_ping(post, ping(expires_in=301))  # another ping, same payload
    second.refresh_from_db()
    assert second.process_error == "skipped:s3_payload:fetched:duplicate"
    assert RawEvent.objects.filter(event_type="activity").count() == 1


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        (URL.replace("https:", "http:"), "s3_payload_not_https"),
        ("https://evil.example.com/a.json", "s3_payload_host_not_allowed"),
        ("https://169.254.169.254/latest/meta-data", "s3_payload_host_not_allowed"),
        ("not a url", "s3_payload_not_https"),
        (None, "s3_payload_no_url"),
    ],
)
def test_urls_off_terra_https_hosts_are_refused(post, bucket, url, reason):
    row = consume_ping(post, ping(url=url))
    row.refresh_from_db()
    assert (row.state, row.process_error) == (
        RawEventState.SKIPPED,
        f"skipped:unmappable:{reason}",
    )
    assert bucket["seen"] == []


@pytest.mark.parametrize("address", ["127.0.0.1", "10.0.0.5", "169.254.169.254", "::1"])
def test_a_host_resolving_to_a_private_or_loopback_address_is_refused(post, bucket, address):
    bucket["addresses"]["value"] = ["52.95.148.1", address]
    row = consume_ping(post, ping())
    row.refresh_from_db()
    assert row.process_error == "skipped:unmappable:s3_payload_private_address"
    assert bucket["seen"] == []


def test_an_expired_link_is_not_fetched(post, bucket, fixture_payload):
    bucket["files"]["/payloads/40f7b0e1/a.json"] = activity_body(fixture_payload)
    row = consume_ping(post, ping(expires_in=60))
    RawEvent.objects.filter(pk=row.pk).update(
        received_at=timezone.now() - timedelta(minutes=2),
        state=RawEventState.PENDING,
        processed_at=None,
        process_error=None,
    )
    raw_event_consume(row.pk)
    row.refresh_from_db()
    assert row.process_error == "skipped:unmappable:s3_payload_expired"


def test_a_payload_over_the_size_cap_is_refused(post, bucket, settings):
    settings.TERRA_WEBHOOK_MAX_BYTES = 1000
    bucket["files"]["/payloads/40f7b0e1/a.json"] = b"{" + b" " * 2000 + b"}"
    row = consume_ping(post, ping())
    row.refresh_from_db()
    assert row.process_error == "skipped:unmappable:s3_payload_too_large"
    assert RawEvent.objects.count() == 1


def test_a_missing_object_is_refused_and_a_bucket_outage_is_retried(post, bucket):
    row = consume_ping(post, ping())
    row.refresh_from_db()
    assert row.process_error == "skipped:unmappable:s3_payload_http_404"
    bucket["files"]["/payloads/40f7b0e1/b.json"] = httpx.Response(503)
    row = consume_ping(post, ping(url=URL.replace("a.json", "b.json")))
    row.refresh_from_db()
    assert row.state == RawEventState.RETRYING  # the consumer tries again with backoff


def test_a_ping_that_points_at_a_ping_is_not_followed(post, bucket):
    bucket["files"]["/payloads/40f7b0e1/a.json"] = json.dumps(ping()).encode()
    row = consume_ping(post, ping())
    row.refresh_from_db()
    assert row.process_error == "skipped:unmappable:s3_payload_nested"


def test_a_download_from_a_bucket_that_trickles_ends_at_its_deadline_and_is_retried(
    post, settings, monkeypatch
):
    # Seen: a bucket trickling one byte every 10 s held a consumer worker for 20 minutes
    # (a per-read timeout of 30 s, no overall deadline). Here the bucket is a real local server
    # that trickles for 2 minutes; the address check is the only thing stood in for.
    from tests.ingest.slow_bucket import trickling_bucket

    settings.TERRA_S3_PAYLOAD_DEADLINE_SECONDS = 1
    s3_payload.set_transport(None)
    with trickling_bucket(interval=0.2, total=120) as bucket:
        local = httpx.URL(f"http://127.0.0.1:{bucket['port']}/payloads/a.json")
        monkeypatch.setattr(
            s3_payload, "check_url", lambda raw: s3_payload.Target(local, "127.0.0.1")
        )
        row = consume_ping(post, ping())
        row.refresh_from_db()
    assert row.state == RawEventState.RETRYING
    assert row.process_error.startswith("TooSlow: s3_payload_too_slow")
    assert bucket["requests"] == 1
    assert not DownloadSlot.objects.filter(held_until__gt=timezone.now()).exists()


def test_a_second_ping_to_a_bucket_another_worker_is_downloading_from_waits_its_turn(
    post, bucket, fixture_payload, alice
):
    bucket["files"]["/payloads/40f7b0e1/a.json"] = activity_body(fixture_payload)
    host = httpx.URL(URL).host
    DownloadSlot.objects.create(host=host, held_until=timezone.now() + timedelta(seconds=30))
    row = consume_ping(post, ping())
    row.refresh_from_db()
    assert (row.state, row.attempts) == (RawEventState.RETRYING, 0)  # deferred, not counted
    assert row.process_error == f"s3_payload_host_busy:{host}"
    assert row.next_attempt_at <= timezone.now() + timedelta(seconds=5)
    assert bucket["seen"] == []
