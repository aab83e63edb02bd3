"""manage.py workflows: the vitalflow-wf views for an operator on the box, straight on the
database (no web server, no key). Mutations go through workflows.actions, so they are
audit-logged like the API's (actor "system:manage.py").

    ./manage.py workflows list
    ./manage.py workflows instances --workflow lab-report --status errored
    ./manage.py workflows get --workflow lab-report --id upload-42 --full
    ./manage.py workflows history --workflow lab-report --id upload-42 --include-logs
    ./manage.py workflows create --workflow lab-report --params '{"upload_id": "42"}'
    ./manage.py workflows pause|resume|restart|terminate --workflow lab-report --id upload-42
    ./manage.py workflows restart --workflow lab-report --id upload-42 --from-step store
    ./manage.py workflows retry-now|skip-wait --workflow lab-report --id upload-42
    ./manage.py workflows bulk restart --workflow lab-report --status errored --newer-than 1h
    ./manage.py workflows send-event --workflow lab-report --id upload-42 --type lab_report
    ./manage.py workflows activate --workflow lab-report --version 2
    ./manage.py workflows gc [--dry-run]
    ./manage.py workflows create --workflow lab-report --version 3   # a canary beside the pointer
    ./manage.py workflows disable|enable --workflow lab-report [--reason "..."]
    ./manage.py workflows check-replay [--workflow lab-report]
"""

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ops.errors import ApiError
from ops.userdata import subject_user
from workflows import actions, replay_check, selectors
from workflows.bulk import BULK_ACTIONS, bulk_filters_clean, instances_matching
from workflows.cli import describe, fmt_log, wait_reason
from workflows.http.serializers import LogRowSerializer

ACTOR = "system:manage.py"
ACTIONS = ("pause", "resume", "restart", "terminate", "retry-now", "skip-wait")


def _json_arg(raw: str | None, flag: str):
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{flag} is not valid JSON: {exc}") from None


class Command(BaseCommand):
    help = "Inspect and operate workflow instances on this box (see docs/workflows/cli.md)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="command", required=True)
        sub.add_parser("list", help="registered workflows, versions, active version")

        p = sub.add_parser("instances", help="instances of a workflow, newest first")
        p.add_argument("--workflow", "-w", required=True)
        p.add_argument("--status", "-s")
        p.add_argument("--limit", type=int, default=50)

        def one(name, help_text):
            p = sub.add_parser(name, help=help_text)
            p.add_argument("--workflow", "-w", required=True)
            p.add_argument("--id", "-i", required=True)
            return p

        one("get", "status and current step").add_argument("--full", action="store_true")
        p = one("history", "steps, events and logs of a run")
        p.add_argument("--run", type=int)
        p.add_argument("--include-logs", action="store_true")
        p = sub.add_parser("create", help="start an instance")
        p.add_argument("--workflow", "-w", required=True)
        p.add_argument("--id", "-i")
        p.add_argument("--params", "-p")
        p.add_argument("--version", type=int, dest="workflow_version", help="canary version")
        p.add_argument("--subject", help="username of the user the work is for")
        for action in ACTIONS:
            p = one(action, f"{action} an instance")
            if action == "restart":
                p.add_argument("--from-step", help="keep results of steps completed before it")
        p = one("send-event", "deliver an event")
        p.add_argument("--type", "-t", required=True)
        p.add_argument("--payload")
        p = sub.add_parser("gc", help="delete finished instances past retention (see workflows.gc)")
        p.add_argument("--dry-run", action="store_true", help="print what would be deleted")
        p.add_argument("--batch-size", type=int, help="instances per transaction")
        p = sub.add_parser("bulk", help="an action on every instance a filter matches, as a job")
        p.add_argument("bulk_action", choices=sorted(BULK_ACTIONS))
        p.add_argument("--workflow", "-w", required=True)
        p.add_argument("--status", "-s", action="append", help="repeatable")
        p.add_argument("--since", help="created at or after (ISO date-time)")
        p.add_argument("--until", help="created before (ISO date-time)")
        p.add_argument("--newer-than", help='e.g. "1h"')
        p.add_argument("--label", "-l", action="append", help="key:value (repeatable)")
        p.add_argument("--dry-run", action="store_true", help="only count the instances")
        p = sub.add_parser("activate", help="make a version the one new instances run")
        p.add_argument("--workflow", "-w", required=True)
        p.add_argument("--version", type=int, required=True, dest="workflow_version")
        for switch in ("disable", "enable"):
            p = sub.add_parser(switch, help=f"{switch} new instances of a workflow (audited)")
            p.add_argument("--workflow", "-w", required=True)
            p.add_argument("--reason", default="")
        p = sub.add_parser("check-replay", help="live instances the code now would not replay")
        p.add_argument("--workflow", "-w")

    def handle(self, *args, command, **options):
        handler = getattr(self, "cmd_" + command.replace("-", "_"), None)
        try:
            if handler is None:
                self.cmd_action(command, options)
            else:
                handler(options)
        except ApiError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from None

    def say(self, line: str = "") -> None:
        self.stdout.write(line)

    def _instance(self, options):
        return selectors.instance_get(workflow_name=options["workflow"], instance_id=options["id"])

    def cmd_list(self, options):
        for wf in selectors.workflow_summaries():
            versions = ",".join(map(str, wf["versions"]))
            self.say(f"{wf['name']}  versions={versions}  active={wf['active_version']}")
            for sched in wf["schedules"]:
                state = (
                    "paused" if sched["paused"] else f"next {sched['next_fire_at']:%Y-%m-%dT%H:%MZ}"
                )
                self.say(f"  schedule {sched['cron']!r} ({sched['timezone']}): {state}")

    def cmd_gc(self, options):
        report = actions.do_gc(
            dry_run=options["dry_run"], batch_size=options["batch_size"], actor=ACTOR
        )
        verb = "would delete" if report.dry_run else "deleted"
        if not report.targets:
            self.say("no retention configured: finished instances are kept forever")
        for target in report.targets:
            n = report.instances.get((target.workflow_name, target.status), 0)
            self.say(
                f"{target.workflow_name}  {target.status} older than {selectors.retention_text(target.keep)}: "
                f"{verb} {n} instance(s)"
            )
        rows = ", ".join(f"{label} {n}" for label, n in sorted(report.rows.items()))
        self.say(f"total: {verb} {rows or 'nothing'}")
        if settings.WORKFLOWS_LOG_RETENTION:
            keep = selectors.retention_text(settings.WORKFLOWS_LOG_RETENTION)
            self.say(f"log lines older than {keep}: {verb} {report.log_lines_pruned}")

    def cmd_instances(self, options):
        rows = selectors.instances_for_list(
            workflow_name=options["workflow"], status=options["status"]
        )[: options["limit"]]
        for row in rows:
            self.say(f"{row.instance_id}  {describe(selectors.instance_details(row))}")

    def cmd_get(self, options):
        instance = self._instance(options)
        meta = selectors.instance_meta(instance)
        self.say(f"id:       {instance.instance_id}")
        self.say(f"workflow: {instance.workflow_name} v{instance.version}")
        self.say(f"status:   {describe(selectors.instance_details(instance))}")
        self.say(f"run:      {instance.run_number}")
        self.say(f"current:  {wait_reason(meta.get('current_step'))}")
        if options["full"]:
            for field in ("created_at", "started_at", "updated_at", "completed_at"):
                self.say(f"{field + ':':13} {meta.get(field) or '-'}")
            self.say("params:\n" + json.dumps(instance.params, indent=2))
            if instance.output is not None:
                self.say("output:\n" + json.dumps(instance.output, indent=2, default=str))

    def cmd_history(self, options):
        instance = self._instance(options)
        run = options["run"] or instance.run_number
        self.say(f"run {run} steps:")
        for step in selectors.instance_steps(instance=instance, run_number=run):
            error = f"  {json.dumps(step.error)}" if step.error else ""
            self.say(
                f"  {step.status:10} {step.type:15} {step.name}  attempts={step.attempts}{error}"
            )
        self.say("events:")
        for event in selectors.instance_events(instance=instance, run_number=run):
            self.say(
                f"  {event.created_at:%Y-%m-%dT%H:%M:%S} {event.type} {json.dumps(event.payload)}"
            )
        if options["include_logs"]:
            self.say("logs:")
            logs = selectors.instance_logs(instance=instance, run_number=run)
            for line in LogRowSerializer(logs, many=True).data:
                self.say("  " + fmt_log(line))

    def cmd_create(self, options):
        instance = actions.do_create(
            workflow_name=options["workflow"],
            instance_id=options["id"],
            params=_json_arg(options["params"], "--params"),
            version=options.get("workflow_version"),
            subject=subject_user(options["subject"]),
            actor=ACTOR,
        )
        canary = f" (v{instance.version})" if options.get("workflow_version") else ""
        self.say(
            f"created {instance.instance_id}{canary}  {describe(selectors.instance_details(instance))}"
        )

    def cmd_disable(self, options):
        actions.do_disable_workflow(name=options["workflow"], actor=ACTOR, reason=options["reason"])
        self.say(f"{options['workflow']} disabled: new instances are refused")

    def cmd_enable(self, options):
        actions.do_enable_workflow(name=options["workflow"], actor=ACTOR, reason=options["reason"])
        self.say(f"{options['workflow']} enabled: new instances are accepted")

    def cmd_check_replay(self, options):
        for line in replay_check.report(replay_check.check(workflow_name=options["workflow"])):
            self.say(line)

    def cmd_action(self, action, options):
        extra = {"from_step": options["from_step"]} if options.get("from_step") else {}
        instance = actions.do_instance_action(
            instance=self._instance(options), action=action.replace("-", "_"), actor=ACTOR, **extra
        )
        self.say(
            f"{action} {instance.instance_id}: {describe(selectors.instance_details(instance))}"
        )

    def cmd_send_event(self, options):
        instance = self._instance(options)
        actions.do_send_event(
            instance=instance,
            event_type=options["type"],
            payload=_json_arg(options["payload"], "--payload"),
            actor=ACTOR,
        )
        instance.refresh_from_db()
        self.say(
            f"sent {options['type']} to {instance.instance_id}: "
            f"{describe(selectors.instance_details(instance))}"
        )

    def cmd_activate(self, options):
        actions.do_activate_version(
            workflow_name=options["workflow"], version=options["workflow_version"], actor=ACTOR
        )
        self.say(f"activated {options['workflow']} v{options['workflow_version']}")

    def cmd_bulk(self, options):
        action = options["bulk_action"]
        raw = {
            "workflow": options["workflow"],
            "status": options["status"],
            "since": options["since"],
            "until": options["until"],
            "newer_than": options["newer_than"],
            "label": options["label"],
        }
        raw = {key: value for key, value in raw.items() if value}
        if options["dry_run"]:
            count = instances_matching(bulk_filters_clean(raw), action).count()
            self.say(f"{action} would touch {count} instance(s)")
            return
        # On the box the job runs here, chunk by chunk; its progress is on the console too.
        job = actions.do_bulk(action=action, filters=raw, actor=ACTOR, inline=True)
        self.say(
            f"bulk job {job.pk} {action}: {job.state}, {job.done} done, {job.failed} failed "
            f"of {job.total}"
        )
