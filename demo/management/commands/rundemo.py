"""`make run`: migrate, create the demo logins (written to var/demo-logins.env), set up
schedules, then run web + qcluster + a workflow runner (supervised like `manage.py serve`) and
feed simulated Terra deliveries (demo/feed.py): a backlog of days at once, then today's data as
it grows, every minute. The terminal stays quiet unless DEMO_VERBOSE is on. Ctrl-C stops
everything. A taken port is refused before anything is printed."""

import io
import json
import logging
import os
import threading
import time
import urllib.request
from importlib import import_module

import httpx
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from demo import feed
from demo.graph_demo import start_demo_run
from demo.logins import Logins, logins_create, logins_write, shown
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


class Command(BaseCommand):
    help = (
        "Run vitalflow locally: migrate, create an operator login, a demo user token and an admin "
        "API key (printed, and written to var/demo-logins.env), set up schedules, start the web "
        "server, a qcluster and a workflow runner, and post simulated Terra deliveries every "
        "minute. Env: PORT (default 8000), DEMO_VERBOSE=1 (access and task logs)."
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
        quiet = self.quiet_logs()
        call_command("migrate", interactive=False, verbosity=0)
        call_command("setup_schedules", stdout=io.StringIO() if quiet else self.stdout)
        base = f"http://127.0.0.1:{port}"
        logins = logins_create(operator=OPERATOR, demo_user=DEMO_USER)
        logins_file = logins_write(logins, base=base, folder=settings.VAR_DIR)
        # The simulator (inside the qcluster) posts backfilled days to this server.
        os.environ.setdefault("TERRA_DEMO_WEBHOOK_URL", f"{base}/webhook/terra")
        hook_url = self.start_hook_stand_in()  # before the children: they inherit its env
        supervisor = Supervisor(
            self.children(sock, quiet=quiet), log=lambda line: self.stdout.write(f"rundemo: {line}")
        )
        supervisor.install_signal_handlers()  # SIGTERM/SIGINT stop the children too
        supervisor.start()
        try:
            self.wait_until_up(base, supervisor)
            self.start_example_workflows()
            graph_run = self.start_example_graph(hook_url)
            self.print_banner(base, logins, graph_run, logins_file=shown(logins_file))
            self.feed(base, days, no_feed, supervisor, quiet=quiet)
        finally:
            supervisor.stop_all(grace=15)
            sock.close()

    def quiet_logs(self) -> bool:
        """Unless asked for (DEMO_VERBOSE, or a LOG_LEVEL of one's own), this process and its
        children log warnings and errors only: per-request, per-task and per-delivery lines
        would bury the banner within seconds."""
        if settings.DEMO_VERBOSE or "LOG_LEVEL" in os.environ:
            return False
        os.environ["LOG_LEVEL"] = "WARNING"  # read by the children's settings
        logging.getLogger().setLevel(logging.WARNING)
        return True

    def children(self, sock, quiet: bool = False) -> list[Child]:
        web = gunicorn(sock, workers=2, quiet=quiet)
        return [
            Child("web", web, pass_fds=(sock.fileno(),), reload_on_hup=True),
            Child("cluster", manage("qcluster")),
            # Timers (sleeps, retries, event timeouts) fire within a second only with a
            # long-running runner: the cluster's wake tasks follow new work, not the clock.
            Child("runner", manage("runworkflows")),
        ]

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
        # Work done for the demo user: wiping them (the console's Wipe all data) deletes it.
        subject = get_user_model().objects.get(username=DEMO_USER).pk
        batch = [
            {"id": f"demo-{n}", "params": {"user": DEMO_USER}, "subject": subject} for n in (2, 3)
        ]
        banner = {"user": DEMO_USER, "confirm_within": BANNER_WAIT}
        workflow.create_batch(
            [{"id": BANNER_INSTANCE, "params": banner, "subject": subject}, *batch]
        )
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

    def print_banner(self, base: str, logins: Logins, graph_run: str, logins_file: str) -> None:
        mode = "DEMO (built-in Terra simulator)" if settings.TERRA_DEMO_MODE else "LIVE Terra"
        key, verbose = logins.admin_key, "" if settings.DEMO_VERBOSE else " (DEMO_VERBOSE=1: logs)"
        lines = [
            "",
            "=" * 72,
            f" vitalflow is running — {mode}",
            f"   console   {base}/admin/   login: {OPERATOR} / {logins.password}",
            f"   logins    {logins_file} (mode 0600; `. {logins_file}` sets BASE, TOKEN, KEY)",
            f"   API docs  {base}/api/docs/",
            f"   user API  curl -H 'Authorization: Bearer {logins.token}' {base}/v1/me",
            f"   operator  curl -H 'X-Admin-Key: {key}' {base}/v1/admin/dlq",
            f"   data      a delivery a minute revises today's daily summary of user {DEMO_USER}:",
            f"             {base}/admin/ingest/rawevent/ , GET /v1/sync?since=<a minute ago>",
            f"   workflow  .venv/bin/vitalflow-wf --url {base}/v1 -H 'X-Admin-Key: {key}' \\",
            f"               instances send-event --workflow {EXAMPLE_WORKFLOW} --id demo-1 \\",
            "               --type goal_confirmed --payload '{\"goal_steps\": 10000}'",
            f"   graph     run {graph_run} waits for a clinician: approve it in the console",
            f"             ({base}/admin/graphs/graphrun/) or with vitalflow-wf graphs events \\",
            f"               --run {graph_run} --type clinician_ack --payload '{{\"approved\": true}}'",
            f"   Ctrl-C stops web, queue and feed{verbose}.",
            "=" * 72,
            "",
        ]
        self.stdout.write("\n".join(lines))

    def feed(
        self, base: str, days: int, no_feed: bool, supervisor: Supervisor, quiet: bool
    ) -> None:
        """First a backlog of `days` ending today, then every minute what demo/feed.py says."""
        enabled = not no_feed and bool(settings.TERRA_WEBHOOK_SECRETS)
        url, last = f"{base}/webhook/terra", timezone.now()
        with httpx.Client(timeout=30) as client:
            if enabled:
                backlog = feed.backlog(username=DEMO_USER, days=days, now=last)
                self.report("backlog", feed.post(client, url, backlog), always=True)
            next_at = time.monotonic() + FEED_EVERY
            while not supervisor.stopping:
                supervisor.poll()
                time.sleep(0.2)
                if enabled and time.monotonic() >= next_at:
                    now = timezone.now()
                    deliveries = feed.minute(username=DEMO_USER, now=now, previous=last)
                    self.report(f"{now:%H:%M}", feed.post(client, url, deliveries), not quiet)
                    last, next_at = now, next_at + FEED_EVERY

    def report(self, label: str, counts: dict[str, int], always: bool) -> None:
        """One line per post: always for the backlog and for trouble, else only when verbose."""
        trouble = set(counts) - {"accepted", "duplicate"}
        if always or trouble:
            summary = ", ".join(f"{outcome}: {n}" for outcome, n in sorted(counts.items()))
            self.stdout.write(
                f"rundemo: feed {label}: {sum(counts.values())} deliveries ({summary})"
            )
