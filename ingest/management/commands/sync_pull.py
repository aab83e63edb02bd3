"""`manage.py sync_pull --url URL --token TOKEN --out FILE.sqlite`: the client side of /v1/sync.

Mirrors one user's data into a local SQLite file (stdlib sqlite3, one table per server table,
columns added as they appear). The `server_time` of the last complete pull is kept in the file,
so a re-run fetches only what changed since. A pull is one local transaction: an interrupted
pull leaves the file as it was, and the next run starts over from the saved point.
"""

import time

import httpx
from django.core.management.base import BaseCommand, CommandError

from ingest.store.mirror import Mirror

# Tests point this at the Django app (httpx.WSGITransport); None means the network.
transport: httpx.BaseTransport | None = None


class Command(BaseCommand):
    help = (
        "Mirror a user's data from a vitalflow server into a local SQLite file through "
        "GET /v1/sync. Re-running fetches only rows changed since the last complete pull "
        "(the server_time saved in the file). Example: manage.py sync_pull --url "
        "http://localhost:8000 --token vfu_... --out alice.sqlite"
    )

    def add_arguments(self, parser):
        parser.add_argument("--url", required=True, help="server base URL, e.g. https://vf.example")
        parser.add_argument("--token", required=True, help="the user's bearer token")
        parser.add_argument("--out", required=True, help="local SQLite file (created if missing)")
        parser.add_argument("--limit", type=int, default=1000, help="rows per page (≤ 2000)")
        parser.add_argument("--full", action="store_true", help="ignore the saved point")

    def handle(self, *args, url, token, out, limit, full, **options):
        mirror = Mirror(out)
        since = None if full else mirror.get_state("since")
        began = time.perf_counter()
        pages = rows = 0
        params: dict = {"limit": limit}
        if since:
            params["since"] = since
        with (
            httpx.Client(
                base_url=url.rstrip("/"),
                headers={"Authorization": f"Bearer {token}"},
                timeout=httpx.Timeout(60.0, connect=10.0),
                transport=transport,
            ) as client,
            mirror.pull(),
        ):
            while True:
                body = self._get(client, params)
                pages += 1
                for table, table_rows in body["tables"].items():
                    if table_rows:
                        mirror.upsert(table, table_rows)
                        rows += len(table_rows)
                if not body.get("next"):
                    break
                params = {"limit": limit, "cursor": body["next"]}
            mirror.set_state("since", body["server_time"])
            mirror.set_state("url", url)
        ms = (time.perf_counter() - began) * 1000
        self.stdout.write(
            f"pulled {rows} rows in {pages} page(s) in {ms:.0f} ms "
            f"(since {since or 'the beginning'}); next since {body['server_time']}"
        )

    def _get(self, client: httpx.Client, params: dict) -> dict:
        try:
            response = client.get("/v1/sync", params=params)
        except httpx.TransportError as exc:
            raise CommandError(f"cannot reach the server: {exc}") from None
        if response.status_code != 200:
            try:
                error = response.json()
                detail = f"{error.get('code')}: {error.get('message')}"
            except ValueError:
                detail = response.text[:200]
            raise CommandError(f"/v1/sync answered {response.status_code} ({detail})")
        return response.json()
