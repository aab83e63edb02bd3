"""Webhook answer time with the database frozen: a private PostgreSQL cluster
(port VF_PRIVATE_PG_PORT, 5442 by default) is frozen with SIGSTOP — the kernel still accepts and
ACKs, the server never replies — while gunicorn (one sync worker, its connection already open)
receives deliveries. Prints each answer's status and time; asserts nothing. With --concurrent,
three sync workers (their connections open) receive --n deliveries at once, as Terra sends them
(8 s client budget), and the answer times are printed sorted.

    .venv/bin/python bench/frozen_db.py [--n 5]
    .venv/bin/python bench/frozen_db.py --concurrent --n 10
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5)
    parser.add_argument("--concurrent", action="store_true")
    args = parser.parse_args()
    import signal
    import tempfile

    import django

    django.setup()
    from tests.ingest import test_frozen_database as frozen

    with tempfile.TemporaryDirectory() as tmp:
        cluster = frozen.private_cluster()
        url, postmaster = next(cluster)
        server = frozen.web_server(url, Path(tmp), workers=3 if args.concurrent else 1)
        try:
            base, _ = next(server)
            for n in range(12 if args.concurrent else 1):
                print("before freezing:", frozen._deliver(base, f"warm {n}").status_code)
            stopped = [postmaster, *frozen._children(postmaster)]
            for pid in stopped:
                os.kill(pid, signal.SIGSTOP)
            times = []
            try:
                if args.concurrent:
                    times = concurrent(frozen, base, args.n)
                for i in range(0 if args.concurrent else args.n):
                    began = time.perf_counter()
                    try:
                        status = frozen._deliver(base, f"frozen-{i}").status_code
                    except Exception as exc:  # the client's own 30 s timeout
                        status = type(exc).__name__
                    times.append(round(time.perf_counter() - began, 2))
                    print(f"frozen delivery {i}: {status} in {times[-1]} s", flush=True)
            finally:
                for pid in stopped:
                    os.kill(pid, signal.SIGCONT)
            print(json.dumps({"answer_seconds": times, "max_s": max(times)}))
        finally:
            server.close()
            cluster.close()


def concurrent(frozen, base: str, n: int) -> list[float]:
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    def one(i: int) -> float:
        began = time.perf_counter()
        try:
            payload = frozen.load_fixture("daily.json")
            payload["note"] = f"concurrent {i}"
            body = json.dumps(payload).encode()
            headers = {"Content-Type": "application/json", "Terra-Signature": frozen.sign(body)}
            status = httpx.post(
                f"{base}/webhook/terra", content=body, headers=headers, timeout=30
            ).status_code
        except Exception as exc:
            status = type(exc).__name__
        seconds = round(time.perf_counter() - began, 2)
        print(f"concurrent delivery {i}: {status} in {seconds} s", flush=True)
        return seconds

    with ThreadPoolExecutor(max_workers=n) as pool:
        return sorted(pool.map(one, range(n)))


if __name__ == "__main__":
    main()
