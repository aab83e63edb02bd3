"""`make run`: migrate, create the demo logins, set up schedules, then run web + qcluster and
feed simulated Terra deliveries so data flows within a minute. Ctrl-C stops everything."""

import io
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from importlib import import_module

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from ops.models import ApiKey
from ops.services import api_key_create, user_token_create
from workflows import get_workflow

DEMO_USER = "demo"
EXAMPLE_MODULE = "workflows.examples"
EXAMPLE_WORKFLOW = "demo-onboarding"
OPERATOR = "admin"
# The example graph's webhook goes to this stand-in (a thread of this process), which the
# graph http action may reach because rundemo lists it in GRAPHS_HTTP_ALLOWED_HOSTS.
GRAPH_DEMO_COMMAND = "labs_graph_demo"


def _interrupt(signum, frame):
    raise KeyboardInterrupt


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
        os.makedirs(settings.VAR_DIR, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        call_command("setup_schedules")
        logins = self.create_logins()
        base = f"http://127.0.0.1:{port}"
        # The simulator (inside the qcluster) posts backfilled days to this server.
        os.environ.setdefault("TERRA_DEMO_WEBHOOK_URL", f"{base}/webhook/terra")
        # The qcluster runs the example workflow's instances, so it must load its module too.
        modules = [m for m in os.environ.get("WORKFLOWS_MODULES", "").split(",") if m]
        os.environ["WORKFLOWS_MODULES"] = ",".join([*modules, EXAMPLE_MODULE])
        hook_url = self.start_hook_stand_in()
        children = self.start_children(port)
        # SIGTERM (timeout, systemd, a closed terminal) stops the children too, like Ctrl-C.
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            self.wait_until_up(base)
            self.start_example_workflows()
            graph_run = self.start_example_graph(hook_url)
            self.print_banner(base, logins, graph_run)
            self.feed(base, days, no_feed, children)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop_children(children)

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

    def start_children(self, port: int) -> list[subprocess.Popen]:
        python = sys.executable
        return [
            subprocess.Popen(
                [python, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload", "--insecure"]
            ),
            subprocess.Popen([python, "manage.py", "qcluster"]),
        ]

    def wait_until_up(self, base: str) -> None:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/schema/", timeout=2).read()
                return
            except Exception:
                time.sleep(0.5)
        raise SystemExit("the web server did not come up on " + base)

    def start_example_workflows(self) -> None:
        """Three instances of the example workflow (ids already there are skipped)."""
        import_module(EXAMPLE_MODULE)
        batch = [{"id": f"demo-{n}", "params": {"user": DEMO_USER}} for n in (1, 2, 3)]
        get_workflow(EXAMPLE_WORKFLOW).create_batch(batch)

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
        """Publish the lab-out-of-range graph and start one run (labs provides the command)."""
        # By command name: ingest never imports labs (DESIGN §1).
        buffer = io.StringIO()
        call_command(GRAPH_DEMO_COMMAND, hook_url=hook_url, stdout=buffer)
        out = buffer.getvalue()
        return out.split()[2] if out.startswith("graph run ") else ""

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

    def feed(self, base: str, days: int, no_feed: bool, children: list[subprocess.Popen]) -> None:
        """First a backlog of `days`, then one new day every minute, until Ctrl-C."""
        enabled = not no_feed and bool(settings.TERRA_WEBHOOK_SECRETS)
        if enabled:
            self.simulate(base, days)
        while all(child.poll() is None for child in children):
            time.sleep(60)
            if enabled:
                self.simulate(base, 1, quiet=True)

    def simulate(self, base: str, days: int, quiet: bool = False) -> None:
        command = [sys.executable, "manage.py", "terra_simulate", "--url", f"{base}/webhook/terra"]
        command += ["--user", DEMO_USER, "--days", str(days)]
        subprocess.call(command, stdout=subprocess.DEVNULL if quiet else None)

    def stop_children(self, children: list[subprocess.Popen]) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
