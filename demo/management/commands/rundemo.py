"""`make run`: migrate, create the demo logins, set up schedules, then run web + qcluster +
a workflow runner (supervised like `manage.py serve`) and feed simulated Terra deliveries: a backlog of days at
once, then one more day every minute. Ctrl-C stops everything. A taken port is refused before
anything is printed."""

import json
import os
import secrets
import subprocess
import threading
import time
import urllib.request
from datetime import date, timedelta
from importlib import import_module

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from demo.graph_demo import start_demo_run
from ops.models import ApiKey
from ops.services import api_key_create, user_token_create
from ops.supervisor import Child, PortInUse, Supervisor, bind_listener, gunicorn, manage
from workflows import get_workflow
from workflows.models import TERMINAL_STATUSES

DEMO_USER = "demo"
EXAMPLE_MODULE = "demo.examples"
EXAMPLE_WORKFLOW = "demo-onboarding"
OPERATOR = "admin"
BANNER_INSTANCE = "demo-1"  # the instance the banner's send-event command finishes
# demo-1 waits this long for its event, so the banner's command still works much later; the
# other two keep the example's short timeout and show the timeout path.
BANNER_WAIT = "1 day"
FEED_EVERY = 60.0


def feed_day(*, today: date, backlog_days: int, tick: int) -> date:
    """The day the feed's `tick`-th minute posts: one day older than everything sent so far,
    so every minute brings genuinely new rows (re-sending a day is deduplicated to nothing)."""
    return today - timedelta(days=backlog_days + tick - 1)


def feed_arguments(*, url: str, day: date) -> list[str]:
    """terra_simulate's arguments for one fed day (no auth: the connection exists by then)."""
    return [
        "--url",
        url,
        "--user",
        DEMO_USER,
        "--days",
        "1",
        "--end-date",
        day.isoformat(),
        "--no-auth",
    ]


class Command(BaseCommand):
    help = (
        "Run vitalflow locally: migrate, create an operator login, a demo user token and an admin API "
        "key (printed), set up schedules, start the web server and a qcluster, and post simulated "
        "Terra deliveries (demo mode) every minute. Env: PORT (default 8000)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument(
            "--days", type=int, default=14, help="days of history the first feed posts"
        )
        parser.add_argument(
            "--no-feed", action="store_true", help="do not post simulated deliveries"
        )

    def handle(self, *args, port, days, no_feed, **options):
        try:
            # First of all: a taken port means another server would answer our banner's URLs.
            sock = bind_listener("127.0.0.1", port)
        except PortInUse as exc:
            raise CommandError(str(exc)) from None
        os.makedirs(settings.VAR_DIR, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        call_command("setup_schedules")
        logins = self.create_logins()
        base = f"http://127.0.0.1:{port}"
        # The simulator (inside the qcluster) posts backfilled days to this server.
        os.environ.setdefault("TERRA_DEMO_WEBHOOK_URL", f"{base}/webhook/terra")
        hook_url = self.start_hook_stand_in()  # before the children: they inherit its env
        supervisor = Supervisor(
            self.children(sock), log=lambda line: self.stdout.write(f"rundemo: {line}")
        )
        supervisor.install_signal_handlers()  # SIGTERM/SIGINT stop the children too
        supervisor.start()
        try:
            self.wait_until_up(base, supervisor)
            self.start_example_workflows()
            graph_run = self.start_example_graph(hook_url)
            self.print_banner(base, logins, graph_run)
            self.feed(base, days, no_feed, supervisor)
        finally:
            supervisor.stop_all(grace=15)
            sock.close()

    def children(self, sock) -> list[Child]:
        web = gunicorn(sock, workers=2)
        return [
            Child("web", web, pass_fds=(sock.fileno(),), reload_on_hup=True),
            Child("cluster", manage("qcluster")),
            # Timers (sleeps, retries, event timeouts) fire within a second only with a
            # long-running runner: the cluster's wake tasks follow new work, not the clock.
            Child("runner", manage("runworkflows")),
        ]

    def create_logins(self) -> dict:
        User = get_user_model()
        password = secrets.token_urlsafe(9)
        operator, _ = User.objects.get_or_create(
            username=OPERATOR, defaults={"email": "admin@localhost"}
        )
        operator.is_staff = operator.is_superuser = True
        operator.set_password(password)
        operator.save()
        demo, _ = User.objects.get_or_create(username=DEMO_USER)
        _, token = user_token_create(user=demo, name="rundemo")
        ApiKey.objects.filter(name="rundemo-operator").delete()
        _, key = api_key_create(name="rundemo-operator", scopes=["*"])
        return {"password": password, "token": token, "admin_key": key}

    def wait_until_up(self, base: str, supervisor: Supervisor) -> None:
        for _ in range(120):
            if not supervisor.alive("web"):
                raise CommandError(f"the web server exited before answering on {base}")
            try:
                urllib.request.urlopen(f"{base}/api/schema/", timeout=2).read()
                return
            except Exception:
                time.sleep(0.5)
        raise CommandError("the web server did not come up on " + base)

    def start_example_workflows(self) -> None:
        """Three instances of the example workflow (ids already there are skipped); the banner's
        instance is restarted if an earlier `make run` finished it, so its command works."""
        import_module(EXAMPLE_MODULE)
        workflow = get_workflow(EXAMPLE_WORKFLOW)
        batch = [{"id": f"demo-{n}", "params": {"user": DEMO_USER}} for n in (2, 3)]
        banner = {"user": DEMO_USER, "confirm_within": BANNER_WAIT}
        workflow.create_batch([{"id": BANNER_INSTANCE, "params": banner}, *batch])
        instance = workflow.get(BANNER_INSTANCE)
        if instance.status() in TERMINAL_STATUSES:
            instance.restart()

    def start_hook_stand_in(self) -> str:
        """A local stand-in for the clinic's webhook: answers every POST with {"received": true}.
        Its host:port goes into the children's GRAPHS_HTTP_ALLOWED_HOSTS."""
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Hook(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                body = json.dumps({"received": True}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        host_port = f"127.0.0.1:{server.server_address[1]}"
        allowed = [h for h in os.environ.get("GRAPHS_HTTP_ALLOWED_HOSTS", "").split(",") if h]
        os.environ["GRAPHS_HTTP_ALLOWED_HOSTS"] = ",".join([*allowed, host_port])
        os.environ.setdefault("GRAPHS_SECRET_CLINIC_TOKEN", "demo-clinic-token")
        return f"http://{host_port}/clinic-hook"

    def start_example_graph(self, hook_url: str) -> str:
        """Publish the lab-out-of-range graph and start one run; its webhook goes to the local
        stand-in, which the graph http action may reach (GRAPHS_HTTP_ALLOWED_HOSTS)."""
        return start_demo_run(hook_url=hook_url, username=DEMO_USER).run_id

    def print_banner(self, base: str, logins: dict, graph_run: str = "") -> None:
        mode = "DEMO (built-in Terra simulator)" if settings.TERRA_DEMO_MODE else "LIVE Terra"
        self.stdout.write(
            "\n".join(
                [
                    "",
                    "=" * 72,
                    f" vitalflow is running — {mode}",
                    f"   console   {base}/admin/   login: {OPERATOR} / {logins['password']}",
                    f"   API docs  {base}/api/docs/",
                    f"   user API  curl -H 'Authorization: Bearer {logins['token']}' {base}/v1/me",
                    f"   operator  curl -H 'X-Admin-Key: {logins['admin_key']}' {base}/v1/admin/dlq",
                    f"   workflow  .venv/bin/vitalflow-wf --url {base}/v1 -H 'X-Admin-Key: {logins['admin_key']}' \\",
                    f"               instances send-event --workflow {EXAMPLE_WORKFLOW} --id demo-1 \\",
                    "               --type goal_confirmed --payload '{\"goal_steps\": 10000}'",
                    f"   graph     run {graph_run} waits for a clinician: approve it in the console",
                    f"             ({base}/admin/graphs/graphrun/) or with vitalflow-wf graphs events \\",
                    f"               --run {graph_run} --type clinician_ack --payload '{{\"approved\": true}}'",
                    "   Ctrl-C stops web, queue and feed.",
                    "=" * 72,
                    "",
                ]
            )
        )

    def feed(self, base: str, days: int, no_feed: bool, supervisor: Supervisor) -> None:
        """First a backlog of `days` ending today, then one more day every minute."""
        enabled = not no_feed and bool(settings.TERRA_WEBHOOK_SECRETS)
        url, today = f"{base}/webhook/terra", timezone.localdate()
        if enabled:
            self.simulate(["--url", url, "--user", DEMO_USER, "--days", str(days)])
        tick, next_at = 1, time.monotonic() + FEED_EVERY
        while not supervisor.stopping:
            supervisor.poll()
            time.sleep(0.2)
            if enabled and time.monotonic() >= next_at:
                day = feed_day(today=today, backlog_days=days, tick=tick)
                self.simulate(feed_arguments(url=url, day=day), quiet=True)
                tick, next_at = tick + 1, next_at + FEED_EVERY

    def simulate(self, arguments: list[str], quiet: bool = False) -> None:
        command = manage("terra_simulate", *arguments)
        subprocess.call(command, stdout=subprocess.DEVNULL if quiet else None)
