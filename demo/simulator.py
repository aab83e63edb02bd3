"""The built-in Terra simulator (demo mode): an httpx transport that answers the Terra API calls
our client makes and, like Terra, delivers the data later as signed webhooks posted to
TERRA_DEMO_WEBHOOK_URL from a background thread.

- GET  /v2/{daily,sleep,activity,body}  backfill → answers at once, then posts one delivery per
  requested day;
- POST /v2/auth/generateWidgetSession   → a widget URL, then an auth delivery as if the user had
  connected a wearable in the widget;
- GET  /v2/subscriptions               → the connections we know;
- POST /v2/lab-reports                 → {"upload_id"}, then a lab_report.completed delivery;
- DELETE /v2/auth/deauthenticateUser   → success, then a deauth delivery, as Terra sends;
- GET  https://{PING_HOST}/payloads/<name> → a payload parked by `ping_payload` (ping mode:
  `terra_simulate --ping` posts `s3_payload` pings whose URL points here; the files live under
  MEDIA_ROOT so the consumer, in another process, downloads them through this transport).
"""

import json
import logging
import re
import threading
import time
import uuid
from datetime import date, timedelta
from pathlib import Path

import httpx
from django.conf import settings
from django.utils import timezone

from demo import payloads as demo_payloads
from ingest.terra.signature import signature_header_value

log = logging.getLogger(__name__)

MAX_BACKFILL_DAYS = 120
# Terra answers a backfill at once and delivers later; the delay keeps the demo honest about it.
DELIVERY_DELAY_SECONDS = 0.5
_BACKFILL_PATH = re.compile(r"^/v2/(daily|sleep|activity|body)$")
_FORM_REFERENCE = re.compile(rb'name="reference_id"\r\n\r\n([^\r]*)\r\n')


def webhook_post(
    client: httpx.Client, url: str, payload: dict, *, secret: str | None = None
) -> httpx.Response:
    """Sign `payload` the way Terra does and POST it, stamped with Terra's ordering header
    (unix ms at emission); returns the answer."""
    body = json.dumps(payload, separators=(",", ":")).encode()
    secret = secret if secret is not None else settings.TERRA_WEBHOOK_SECRETS[0]
    headers = {
        "Content-Type": "application/json",
        "terra-signature": signature_header_value(body, secret=secret),
        "x-terra-ordering-timestamp": str(time.time_ns() // 1_000_000),
    }
    return client.post(url, content=body, headers=headers)


def _deliver_later(payloads: list[dict]) -> None:
    """Post `payloads` to the demo webhook URL from a daemon thread (Terra is asynchronous)."""
    if not payloads or not settings.TERRA_WEBHOOK_SECRETS:
        return
    url = settings.TERRA_DEMO_WEBHOOK_URL
    secret = settings.TERRA_WEBHOOK_SECRETS[0]

    def run():
        time.sleep(DELIVERY_DELAY_SECONDS)
        with httpx.Client(timeout=30) as client:
            for payload in payloads:
                try:
                    webhook_post(client, url, payload, secret=secret)
                except httpx.HTTPError as exc:
                    log.warning("simulator: delivery to %s failed: %s", url, exc)
                    return

    threading.Thread(target=run, name="terra-simulator", daemon=True).start()


def _reference_for(terra_user_id: str) -> tuple[str, str]:
    """(reference_id, provider) we hold for this Terra user id, so backfilled data names its
    user the way Terra would."""
    from ingest.models import TerraConnection

    row = (
        TerraConnection.objects.filter(terra_user_id=terra_user_id)
        .values_list("reference_id", "provider")
        .first()
    )
    if row is None:
        return "", demo_payloads.DEFAULT_PROVIDER
    return row[0] or "", row[1] or demo_payloads.DEFAULT_PROVIDER


def _days(request: httpx.Request) -> list[date]:
    params = request.url.params
    try:
        end = date.fromisoformat(params.get("end_date") or timezone.now().date().isoformat())
        start = date.fromisoformat(params.get("start_date") or end.isoformat())
    except ValueError:
        return []
    count = min((end - start).days, MAX_BACKFILL_DAYS)
    return [end - timedelta(days=offset) for offset in range(count, -1, -1)]


def _backfill(request: httpx.Request, data_type: str) -> httpx.Response:
    terra_user_id = request.url.params.get("user_id", "")
    if not terra_user_id:
        return httpx.Response(400, json={"status": "error", "message": "user_id is required"})
    reference_id, provider = _reference_for(terra_user_id)
    days, now = _days(request), timezone.now()
    # Like Terra, today's data is what the wearable has synced so far (a daily's totals to now).
    payloads = [
        demo_payloads.data_payload(
            data_type, reference_id, day, as_of=now, provider=provider, terra_user_id=terra_user_id
        )
        for day in days
    ]
    if request.url.params.get("to_webhook", "true") != "false":
        _deliver_later(payloads)
    return httpx.Response(
        200,
        json={
            "status": "success",
            "type": data_type,
            "message": f"{len(payloads)} payloads will be sent to your webhook",
            "reference": str(uuid.uuid4()),
        },
    )


def _widget_session(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content or b"{}")
    reference_id = str(body.get("reference_id") or "demo")
    provider = str(body.get("providers") or demo_payloads.DEFAULT_PROVIDER).split(",")[0]
    session_id = str(uuid.uuid4())
    _deliver_later([demo_payloads.auth_payload(reference_id, provider=provider.upper())])
    return httpx.Response(
        200,
        json={
            "status": "success",
            "session_id": session_id,
            "url": f"https://widget.tryterra.co/session/{session_id}?demo=1",
            "expires_in": 900,
        },
    )


def _subscriptions(request: httpx.Request) -> httpx.Response:
    from ingest.models import TerraConnection

    users = [
        {
            "user_id": c.terra_user_id,
            "provider": c.provider,
            "reference_id": c.reference_id,
            "scopes": c.scopes,
            "active": c.deactivated_at is None,
            "last_webhook_update": None,
        }
        for c in TerraConnection.objects.order_by("id")[:1000]
    ]
    return httpx.Response(200, json={"status": "success", "users": users})


def _lab_report(request: httpx.Request) -> httpx.Response:
    content = request.read()
    if b'name="files"' not in content:
        return httpx.Response(400, json={"status": "error", "message": "No Files Provided"})
    match = _FORM_REFERENCE.search(content)
    reference_id = match.group(1).decode(errors="replace") if match else ""
    upload_id = f"upl_{uuid.uuid4().hex[:12]}"
    _deliver_later(
        [
            demo_payloads.lab_report_payload(
                upload_id=upload_id, reference_id=reference_id, report_date=timezone.now().date()
            )
        ]
    )
    return httpx.Response(200, json={"upload_id": upload_id, "current_status": "processing"})


def _deauthenticate(request: httpx.Request) -> httpx.Response:
    # Terra knows its users whether or not we still hold their connection (a wipe deletes it
    # before this call): any user id is deauthenticated, and its deauth delivery follows.
    terra_user_id = request.url.params.get("user_id", "")
    if not terra_user_id:
        return httpx.Response(400, json={"status": "error", "message": "user_id is required"})
    reference_id, provider = _reference_for(terra_user_id)
    user = demo_payloads.terra_user(reference_id, provider=provider, terra_user_id=terra_user_id)
    _deliver_later([{"type": "deauth", "status": "success", "user": {**user, "active": False}}])
    return httpx.Response(200, json={"status": "success"})


# The simulator's stand-in for Terra's payload bucket (ingest.normalizers.s3_payload fetches it
# through the transport `install` gives it, without a DNS lookup).
PING_HOST = "terra-payload-simulator.s3.amazonaws.com"
PING_EXPIRES_SECONDS = 300
_PING_NAME = re.compile(r"^/payloads/([0-9a-f]{32})\.json$")


def _ping_dir() -> Path:
    return Path(settings.MEDIA_ROOT) / "terra-simulator-payloads"


def ping_payload(payload: dict) -> dict:
    """Park `payload` where the simulated bucket serves it and return the `s3_payload` ping
    Terra would send instead of it (terra-openapi-v2.yaml, S3PayloadEvent)."""
    name = uuid.uuid4().hex
    _ping_dir().mkdir(parents=True, exist_ok=True)
    body = json.dumps(payload, separators=(",", ":")).encode()
    (_ping_dir() / f"{name}.json").write_bytes(body)
    return {
        "type": "s3_payload",
        "status": "success",
        "url": f"https://{PING_HOST}/payloads/{name}.json?X-Amz-Signature=simulated",
        "expires_in": PING_EXPIRES_SECONDS,
    }


def _ping_download(request: httpx.Request) -> httpx.Response:
    match = _PING_NAME.match(request.url.path)
    target = _ping_dir() / f"{match.group(1)}.json" if match else None
    if target is None or not target.exists():
        return httpx.Response(404, text="NoSuchKey")
    return httpx.Response(200, content=target.read_bytes())


def simulator_handler(request: httpx.Request) -> httpx.Response:
    path = request.url.path
    if request.url.host == PING_HOST and request.method == "GET":
        return _ping_download(request)
    match = _BACKFILL_PATH.match(path)
    if request.method == "GET" and match:
        return _backfill(request, match.group(1))
    if request.method == "POST" and path == "/v2/auth/generateWidgetSession":
        return _widget_session(request)
    if request.method == "GET" and path == "/v2/subscriptions":
        return _subscriptions(request)
    if request.method == "POST" and path == "/v2/lab-reports":
        return _lab_report(request)
    if request.method == "DELETE" and path == "/v2/auth/deauthenticateUser":
        return _deauthenticate(request)
    return httpx.Response(404, json={"status": "error", "message": f"simulator: no {path}"})


def simulator_transport() -> httpx.MockTransport:
    return httpx.MockTransport(simulator_handler)


def install() -> None:
    """Demo mode: the Terra client and s3_payload downloads from PING_HOST talk to the simulator
    (the demo app's ready() calls this in every process)."""
    from ingest.normalizers import s3_payload
    from ingest.terra import client

    transport = simulator_transport()
    client.set_transport(transport)
    s3_payload.set_simulated_bucket(PING_HOST, transport)
