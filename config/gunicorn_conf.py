"""gunicorn settings `serve` passes (`--config python:config.gunicorn_conf`): a dead worker's
Prometheus files are marked dead so /metrics stops adding up its live gauges."""

import os


def child_exit(server, worker):
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
