"""`manage.py terra_simulate --url URL [--user NAME] [--days N] [--ping]`: sign and post realistic
Terra deliveries (an auth, then N days of daily, sleep, activity and body) to a running server.
--ping sends the data as Terra's ping-mode destinations get it: `s3_payload` pings whose URL
the server downloads (from the simulator's bucket: demo mode, same MEDIA_ROOT)."""

from datetime import date

import httpx
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from demo import payloads as demo_payloads
from demo.feed import response_outcome
from demo.simulator import ping_payload, webhook_post


def http_client() -> httpx.Client:
    """The HTTP client deliveries go through (tests swap in a WSGI transport)."""
    return httpx.Client(timeout=60)


class Command(BaseCommand):
    help = "Post signed, realistic Terra webhook deliveries (auth + N days of data) to a URL."

    def add_arguments(self, parser):
        parser.add_argument(
            "--url", required=True, help="webhook URL, e.g. http://127.0.0.1:8000/webhook/terra"
        )
        parser.add_argument("--user", default="demo", help="reference_id (username) to send as")
        parser.add_argument("--days", type=int, default=7, help="days of data, ending today")
        parser.add_argument("--provider", default=demo_payloads.DEFAULT_PROVIDER)
        parser.add_argument(
            "--end-date", type=date.fromisoformat, help="last day sent, YYYY-MM-DD (default today)"
        )
        parser.add_argument(
            "--no-auth", action="store_true", help="data only (the connection already exists)"
        )
        parser.add_argument(
            "--ping",
            action="store_true",
            help="send data as s3_payload pings (ping mode) the server downloads",
        )

    def handle(self, *args, url, user, days, provider, end_date, no_auth, ping, **options):
        if not settings.TERRA_WEBHOOK_SECRETS:
            raise CommandError("TERRA_WEBHOOK_SECRET is empty: nothing to sign with")
        if days < 0 or days > 365:
            raise CommandError("--days must be between 0 and 365")
        today = end_date or timezone.localdate()
        payloads = [] if no_auth else [demo_payloads.auth_payload(user, provider=provider)]
        for offset in range(days - 1, -1, -1):
            day = today - timezone.timedelta(days=offset)
            data = [
                demo_payloads.data_payload(kind, user, day, provider=provider)
                for kind in demo_payloads.DATA_TYPES
            ]
            payloads += [ping_payload(p) for p in data] if ping else data
        counts: dict[str, int] = {}
        with http_client() as client:
            for payload in payloads:
                label = f"{payload['type']:<8} {self._day(payload)}"
                try:
                    response = webhook_post(client, url, payload)
                except httpx.HTTPError as exc:
                    raise CommandError(f"{label}: could not reach {url}: {exc}") from exc
                self.stdout.write(f"{label} → {response.status_code} {response.text.strip()}")
                key = response_outcome(response)
                counts[key] = counts.get(key, 0) + 1
        summary = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
        self.stdout.write(
            self.style.SUCCESS(f"sent {len(payloads)} deliveries to {url} ({summary})")
        )

    @staticmethod
    def _day(payload: dict) -> str:
        data = payload.get("data")
        if isinstance(data, list) and data:
            return str(
                data[0]
                .get("metadata", {})
                .get("end_time" if payload["type"] == "sleep" else "start_time", "")
            )[:10]
        if payload["type"] == "s3_payload":
            return payload["url"].split("?")[0].rsplit("/", 1)[-1]
        return payload["user"]["user_id"]
