"""vitalflow-wf's `bulk` group: an action on every instance a filter matches, counted first
(--dry-run), run by the server as a tracked job (--wait follows its progress), and `bulk job`
to look at one. HTTP only, like workflows.cli; it joins the script through its extra_groups."""

import time

from workflows import cli as wf

EXAMPLES = """examples:
  vitalflow-wf bulk restart --workflow lab-report --status errored --newer-than 1h --dry-run
  vitalflow-wf bulk restart --workflow lab-report --status errored --newer-than 1h --wait
  vitalflow-wf bulk job 42"""
LIVE = ("queued", "running")


def _print(job: dict, out) -> None:
    print(
        f"bulk job {job['id']} {job['kind']}: {job['state']}, "
        f"{job['done'] + job['failed']}/{job['total']} ({job['failed']} failed)",
        file=out,
    )


def cmd_bulk(api: wf.Api, args, out) -> None:
    wanted = {
        key: getattr(args, key) for key in ("status", "since", "until", "newer_than", "label")
    }
    body = {"filter": {k: v for k, v in wanted.items() if v}, "dry_run": args.dry_run}
    path = f"workflows/{args.workflow}/instances/bulk/{args.bulk_action}"
    data = api.call("POST", path, body=body)
    if args.dry_run:
        print(f"{args.bulk_action} would touch {data['count']} instance(s)", file=out)
        return
    while args.wait and data["state"] in LIVE:
        time.sleep(args.interval)
        data = api.call("GET", f"workflows/_bulk/{data['id']}")
    _print(data, out)


def cmd_job(api: wf.Api, args, out) -> None:
    _print(api.call("GET", f"workflows/_bulk/{args.job_id}"), out)


def add_commands(groups) -> None:
    group = wf._sub(groups, "bulk", "bulk", "actions on every instance a filter matches")
    group.epilog = EXAMPLES + "\n\n" + wf.ENV_HELP
    cmds = group.add_subparsers(dest="command", required=True)
    for action in ("pause", "resume", "restart", "terminate"):
        p = wf._sub(cmds, action, f"bulk {action}", f"{action} every matching instance", cmd_bulk)
        p.set_defaults(bulk_action=action)
        wf._instance_args(p, with_id=False)
        p.add_argument("--status", "-s", action="append", help="repeatable")
        p.add_argument("--since", help="created at or after (ISO date-time)")
        p.add_argument("--until", help="created before (ISO date-time)")
        p.add_argument("--newer-than", help='e.g. "1h"')
        p.add_argument("--label", "-l", action="append", help="key:value (repeatable)")
        p.add_argument("--dry-run", action="store_true", help="only count the instances")
        p.add_argument("--wait", action="store_true", help="follow the job until it ends")
        p.add_argument("--interval", type=float, default=1.0, help="seconds between polls")
    p = wf._sub(cmds, "job", "bulk job", "a bulk job's progress", cmd_job)
    p.add_argument("job_id", type=int)


add_commands.group_name = "bulk"
