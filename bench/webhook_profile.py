"""Where a webhook delivery's CPU goes, in one process (no HTTP server, no client): N signed
deliveries through each layer of the webhook path, the process CPU per delivery of each, and
with --cprofile the hottest functions of the whole path.

    .venv/bin/python bench/webhook_profile.py [--n 1000] [--rounds 3] [--cprofile]

Layers, outermost first: the WSGI application (Django's handler and middleware), the webhook
view alone, raw_event_record under the database deadline (ops.deadline), raw_event_record
alone. The differences are what each layer costs. It uses a scratch PostgreSQL database
(vf_bench_webhook, dropped and re-created) and prints figures; it asserts nothing.
"""

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ingest import SECRET, bodies, django_setup, load_average, recreate_database  # noqa: E402


def environ(body: bytes) -> dict:
    from ingest.terra.signature import signature_header_value

    return {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/webhook/terra",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": "127.0.0.1:8000",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_TERRA_SIGNATURE": signature_header_value(body, secret=SECRET),
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http",
    }


def layers() -> dict:
    from django.conf import settings
    from django.core.handlers.wsgi import WSGIRequest
    from django.core.wsgi import get_wsgi_application

    from ingest.recording import raw_event_record
    from ingest.webhook import terra_webhook
    from ops.deadline import within_deadline

    app = get_wsgi_application()

    def answered(status, headers, exc_info=None):
        if not status.startswith("200"):
            raise SystemExit(f"the webhook answered {status}")

    def wsgi(env):
        response = app(env, answered)
        b"".join(response)
        response.close()

    def view(env):
        if terra_webhook(WSGIRequest(env)).status_code != 200:
            raise SystemExit("the webhook view did not answer 200")

    def record(env, deadline=True):
        body = env["wsgi.input"].read()
        headers = {"Terra-Signature": env["HTTP_TERRA_SIGNATURE"]}
        if deadline:
            within_deadline(
                settings.TERRA_WEBHOOK_DB_DEADLINE_SECONDS,
                raw_event_record,
                body=body,
                headers=headers,
                request_id="bench",
            )
        else:
            raw_event_record(body=body, headers=headers, request_id="bench")

    return {
        "WSGI app (handler + middleware)": wsgi,
        "webhook view": view,
        "raw_event_record under the deadline": record,
        "raw_event_record": lambda env: record(env, deadline=False),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--db", default="vf_bench_webhook")
    parser.add_argument("--cprofile", action="store_true", help="profile the WSGI app's path")
    args = parser.parse_args()
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or (
        __import__("tempfile").mkdtemp(prefix="vf-bench-prometheus-")
    )
    django_setup(recreate_database(args.db))
    runs = layers()
    for env in map(environ, bodies(200, f"warm-{time.time()}")):  # connections, caches
        runs["WSGI app (handler + middleware)"](env)
    print(f"webhook path, in process · N={args.n} · load {load_average()}", flush=True)
    figures: dict[str, list[float]] = {}
    for round_ in range(args.rounds):
        for name, run in runs.items():
            envs = [environ(b) for b in bodies(args.n, f"{name}-{round_}-{time.time()}")]
            began = time.process_time()
            for env in envs:
                run(env)
            figures.setdefault(name, []).append((time.process_time() - began) / args.n * 1000)
    for name, values in figures.items():
        shown = " ".join(f"{v:.3f}" for v in values)
        print(f"  {name:38s} CPU ms/delivery {shown}  (min {min(values):.3f})")
    print(f"  load after {load_average()}", flush=True)
    if args.cprofile:
        envs = [environ(b) for b in bodies(args.n, f"profile-{time.time()}")]
        profile = cProfile.Profile(time.process_time)
        profile.enable()
        for env in envs:
            runs["WSGI app (handler + middleware)"](env)
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()
