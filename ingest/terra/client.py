"""Small Terra API client on httpx. In demo mode (no TERRA_API_KEY) the demo app installs its
simulator with set_transport, so the code path is the same as in production."""

import logging
import time
from datetime import date

import httpx
from django.conf import settings

from ops import pacing
from ops.pacing import retry_after_seconds

log = logging.getLogger(__name__)

BACKFILL_TYPES = ("activity", "sleep", "daily", "body")
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)

# Tests (and the simulator) replace this to answer at the HTTP boundary.
_transport_override: httpx.BaseTransport | None = None


class TerraError(Exception):
    """Terra answered with a non-2xx status."""

    def __init__(self, status: int, message: str, body=None):
        super().__init__(f"Terra answered {status}: {message}")
        self.status = status
        self.body = body


class TerraRateLimited(TerraError):
    """Terra answered 429 or 503 and asked for more patience than this call may wait:
    `retry_after` (seconds, None when it did not say) tells the caller when to try again."""

    def __init__(self, status: int, message: str, body=None, *, retry_after: float | None):
        super().__init__(status, message, body)
        self.retry_after = retry_after


class TerraNetworkError(Exception):
    """Terra could not be reached (DNS, connect, timeout)."""


def set_transport(transport: httpx.BaseTransport | None) -> None:
    global _transport_override
    _transport_override = transport


def _transport() -> httpx.BaseTransport | None:
    return _transport_override


class TerraClient:
    def __init__(
        self, *, base_url: str | None = None, dev_id: str | None = None, api_key: str | None = None
    ):
        self.base_url = (base_url or settings.TERRA_API_URL).rstrip("/")
        self.headers = {
            "dev-id": dev_id or settings.TERRA_DEV_ID,
            "x-api-key": api_key or settings.TERRA_API_KEY or "demo",
        }

    def _client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url,
            headers=self.headers,
            timeout=DEFAULT_TIMEOUT,
            transport=_transport(),
        )

    def _request(self, method: str, path: str, **kwargs):
        """One call, paced (TERRA_API_RATE_PER_SECOND across every process: Terra limits each
        developer); a 429 or 503 is tried again after its Retry-After while that fits
        TERRA_API_MAX_WAIT_SECONDS (at most RETRY_AFTER_WAITS times), else TerraRateLimited."""
        max_wait = float(settings.TERRA_API_MAX_WAIT_SECONDS)
        for waits in range(RETRY_AFTER_WAITS + 1):
            _pace(max_wait)
            response = self._send(method, path, **kwargs)
            if response.status_code not in (429, 503):
                break
            wait = retry_after_seconds(response.headers.get("Retry-After"))
            if wait is None or wait > max_wait or waits == RETRY_AFTER_WAITS:
                raise TerraRateLimited(
                    response.status_code,
                    _message(response) or response.reason_phrase,
                    _body(response),
                    retry_after=wait,
                )
            log.info(
                "Terra answered %s to %s %s: again in %.1f s",
                response.status_code,
                method,
                path,
                wait,
            )
            time.sleep(wait)
        body = _body(response)
        if response.status_code >= 400:
            raise TerraError(
                response.status_code, _message(response) or response.reason_phrase, body
            )
        return body

    def _send(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            with self._client() as client:
                return client.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise TerraNetworkError(f"{method} {path}: {exc.__class__.__name__}: {exc}") from exc

    def request_backfill(
        self,
        *,
        terra_user_id: str,
        data_type: str,
        start_date: date,
        end_date: date,
        to_webhook: bool = True,
    ) -> dict:
        """GET /v2/{type}?user_id=&start_date=&end_date=&to_webhook=true: Terra answers at once
        and delivers the data by webhook later."""
        if data_type not in BACKFILL_TYPES:
            raise ValueError(f"unknown backfill type {data_type!r}")
        return self._request(
            "GET",
            f"/v2/{data_type}",
            params={
                "user_id": terra_user_id,
                "start_date": start_date.isoformat(),
                "end_date": end_date.isoformat(),
                "to_webhook": "true" if to_webhook else "false",
            },
        )

    def generate_widget_session(
        self, *, reference_id: str, providers: list[str] | None = None
    ) -> dict:
        payload = {"reference_id": reference_id, "language": "en"}
        if providers:
            payload["providers"] = ",".join(p.upper() for p in providers)
        return self._request("POST", "/v2/auth/generateWidgetSession", json=payload)

    def list_subscriptions(self) -> list[dict]:
        """GET /v2/subscriptions: every user Terra holds for this developer."""
        body = self._request("GET", "/v2/subscriptions")
        return body.get("users", []) if isinstance(body, dict) else []

    def upload_lab_report(
        self, *, reference_id: str, filename: str, content: bytes, content_type: str
    ) -> dict:
        """POST /v2/lab-reports with form fields reference_id and `files` (plural: Terra answers
        400 "No Files Provided" to `file`)."""
        return self._request(
            "POST",
            "/v2/lab-reports",
            data={"reference_id": reference_id},
            files={"files": (filename, content, content_type)},
        )

    def deauthenticate_user(self, *, terra_user_id: str) -> dict:
        """DELETE /v2/auth/deauthenticateUser?user_id=: Terra deletes what it holds for the user
        and revokes its access to their provider (it then sends a `deauth` webhook). An unknown
        user is a 404 TerraError."""
        return self._request(
            "DELETE", "/v2/auth/deauthenticateUser", params={"user_id": terra_user_id}
        )


def get_terra_client() -> TerraClient:
    return TerraClient()


RETRY_AFTER_WAITS = 3  # Retry-After waits within one call


def _pace(max_wait: float) -> None:
    rate = settings.TERRA_API_RATE_PER_SECOND
    if not rate:
        return
    try:
        pacing.acquire("terra", per_second=float(rate), max_wait=max_wait)
    except pacing.PaceExceeded as exc:
        raise TerraRateLimited(
            429, "our own pace for Terra is full", retry_after=exc.retry_after
        ) from exc


def _body(response: httpx.Response):
    try:
        return response.json()
    except ValueError:
        return {"raw": response.text[:2000]}


def _message(response: httpx.Response) -> str | None:
    body = _body(response)
    return body.get("message") if isinstance(body, dict) else None
