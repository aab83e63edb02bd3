"""manage.py serve: the production process set on one box, supervised (ops.supervisor):

  web      gunicorn config.wsgi (WEB_CONCURRENCY or cores + 1 sync workers) on --host:--port
  cluster  manage.py qcluster (the queue and the schedules)
  runner   manage.py runworkflows (workflow instances, timers within a second)

A child that exits is restarted with a growing backoff; SIGTERM/SIGINT stop all children
(gracefully, then killed after 30 s), SIGHUP reloads gunicorn's workers. A taken port is refused
before anything starts. `--only web` (repeatable) runs a subset, e.g. one per container."""

import os

from django.core.management.base import BaseCommand, CommandError

from ops.metrics import multiproc_dir_prepare
from ops.supervisor import (
    Child,
    PortInUse,
    Supervisor,
    bind_listener,
    default_web_workers,
    gunicorn,
    manage,
)

KINDS = ("web", "cluster", "runner")


class Command(BaseCommand):
    help = (
        "Run vitalflow in production on this box: gunicorn + a qcluster + a workflow runner, "
        "restarted when they crash. Env: PORT (default 8000), WEB_CONCURRENCY (gunicorn workers)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT") or 8000))
        parser.add_argument(
            "--host", default=os.environ.get("HOST") or "127.0.0.1", help="0.0.0.0 in a container"
        )
        parser.add_argument("--workers", type=int, default=default_web_workers())
        parser.add_argument("--runner-concurrency", type=int, default=1)
        parser.add_argument("--only", action="append", choices=KINDS, help="run only these")

    def handle(self, *args, port, host, workers, runner_concurrency, only, **options):
        kinds = only or list(KINDS)
        # One Prometheus directory for every child, so /metrics adds up the counters of all
        # gunicorn workers and of the cluster's workers (ops.metrics).
        multiproc_dir_prepare()
        children, sock = [], None
        if "web" in kinds:
            try:
                sock = bind_listener(host, port)
            except PortInUse as exc:
                raise CommandError(str(exc)) from None
            argv = gunicorn(sock, workers=workers)
            children.append(Child("web", argv, pass_fds=(sock.fileno(),), reload_on_hup=True))
        if "cluster" in kinds:
            children.append(Child("cluster", manage("qcluster")))
        if "runner" in kinds:
            runner = manage("runworkflows", "--concurrency", str(runner_concurrency))
            children.append(Child("runner", runner))
        where = f" on http://{host}:{sock.getsockname()[1]}" if sock else ""
        self.stdout.write(f"serve: {', '.join(kinds)}{where} (web workers: {workers})")
        supervisor = Supervisor(children, log=lambda line: self.stdout.write(f"serve: {line}"))
        try:
            code = supervisor.run()
        finally:
            if sock is not None:
                sock.close()
        if code:
            raise SystemExit(code)
