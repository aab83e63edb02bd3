"""vitalflow-wf: the workflows console over HTTP, for any deployment.

Deliberately HTTP only (httpx + argparse): no Django, no project imports, no database, so the
same script works from a laptop against production and from CI against a test server.
Exit codes: 0 ok, 1 the API answered an error (its code and message are printed), 2 usage,
3 the server could not be reached or answered something that is not the API.
"""

import argparse
import json
import os
import sys
import time
import uuid

import httpx

ENV_HELP = """environment:
  VITALFLOW_URL       API base URL, e.g. http://127.0.0.1:8000/v1 (same as --url)
  VITALFLOW_HEADERS   extra headers, one "Name: value" per line (or separated by ';'),
                      e.g. "X-Admin-Key: vfk_..."; -H adds to them"""

EXAMPLES = {
    "root": """examples:
  export VITALFLOW_URL=http://127.0.0.1:8000/v1 VITALFLOW_HEADERS="X-Admin-Key: vfk_..."
  vitalflow-wf workflows list
  vitalflow-wf instances list --workflow lab-report --status errored
  vitalflow-wf instances get --workflow lab-report --id upload-42 --full
  vitalflow-wf instances create --workflow lab-report --params '{"upload_id": "u1"}'
  vitalflow-wf instances logs --workflow lab-report --id upload-42 --follow""",
    "workflows": "examples:\n  vitalflow-wf workflows list",
    "workflows list": "examples:\n  vitalflow-wf --url http://127.0.0.1:8000/v1 workflows list",
    "instances": """examples:
  vitalflow-wf instances list --workflow lab-report
  vitalflow-wf instances terminate --workflow lab-report --id upload-42""",
    "instances list": """examples:
  vitalflow-wf instances list --workflow lab-report
  vitalflow-wf instances list --workflow lab-report --status waiting --page-size 100
  vitalflow-wf instances list --workflow lab-report --all
  vitalflow-wf instances list --workflow lab-report --label user:alice --label tier:gold""",
    "instances get": """examples:
  vitalflow-wf instances get --workflow lab-report --id upload-42
  vitalflow-wf instances get --workflow lab-report --id upload-42 --full""",
    "instances history": """examples:
  vitalflow-wf instances history --workflow lab-report --id upload-42
  vitalflow-wf instances history --workflow lab-report --id upload-42 --run 1 --include-logs \\
      --log-level error --log-category workflow""",
    "instances logs": """examples:
  vitalflow-wf instances logs --workflow lab-report --id upload-42
  vitalflow-wf instances logs --workflow lab-report --id upload-42 --follow""",
    "instances create": """examples:
  vitalflow-wf instances create --workflow lab-report
  vitalflow-wf instances create --workflow lab-report --id upload-42 \\
      --params '{"upload_id": "42"}' --idempotency-key retry-safe-42 --label user:alice""",
    "instances send-event": """examples:
  vitalflow-wf instances send-event --workflow lab-report --id upload-42 --type lab_report \\
      --payload '{"results": []}'""",
}
for _action in ("pause", "resume", "restart", "terminate", "retry-now", "skip-wait"):
    EXAMPLES[f"instances {_action}"] = (
        f"examples:\n  vitalflow-wf instances {_action} --workflow lab-report --id upload-42"
    )
EXAMPLES["instances restart"] += (
    "\n  vitalflow-wf instances restart --workflow lab-report --id upload-42 --from-step store"
)


class CliError(Exception):
    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


def parse_headers(lines: list[str]) -> dict[str, str]:
    headers = {}
    for line in lines:
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise CliError(f'bad header {line!r}: expected "Name: value"', 2)
        headers[name.strip()] = value.strip()
    return headers


def parse_json_arg(raw: str | None, flag: str):
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CliError(f"{flag} is not valid JSON: {exc}", 2) from None


class Api:
    """Thin client: every call returns the decoded JSON or raises CliError with the API's
    code and message."""

    def __init__(self, base: str, headers: dict[str, str], timeout: float):
        self.client = httpx.Client(
            base_url=base.rstrip("/") + "/", headers=headers, timeout=timeout
        )

    def call(self, method: str, path: str, *, params=None, body=None, headers=None) -> dict:
        query = {k: v for k, v in (params or {}).items() if v not in (None, False, "")}
        try:
            response = self.client.request(
                method, path.lstrip("/"), params=query, json=body, headers=headers
            )
        except httpx.HTTPError as exc:
            raise CliError(f"cannot reach {self.client.base_url}: {exc}", 3) from None
        try:
            data = response.json()
        except ValueError:
            raise CliError(
                f"HTTP {response.status_code} from {response.url}: not a JSON answer "
                "(is --url the API base, e.g. http://host:8000/v1?)",
                3,
            ) from None
        if response.is_error:
            code = data.get("code", "error") if isinstance(data, dict) else "error"
            message = data.get("message", "") if isinstance(data, dict) else str(data)
            hint = (
                " (is --url the API base, e.g. http://host:8000/v1?)" if code == "not_found" else ""
            )
            raise CliError(f"{code}: {message} (HTTP {response.status_code}){hint}")
        return data


def instance_path(args, suffix: str = "") -> str:
    return f"workflows/{args.workflow}/instances/{args.id}{suffix}"


def describe(details: dict) -> str:
    text = details.get("status", "?")
    if details.get("error"):
        error = details["error"]
        text += f"  {error.get('name', '')}: {error.get('message', '')}"
    elif "output" in details and details["output"] is not None:
        text += f"  output={json.dumps(details['output'])[:60]}"
    return text


def wait_reason(step: dict | None) -> str:
    if not step:
        return "-"
    parts = [f"{step.get('type', 'step')} {step.get('name')!r} {step.get('status', '')}"]
    if step.get("attempts"):
        parts.append(f"attempt {step['attempts']}/{step.get('max_attempts') or '?'}")
    for field, label in (
        ("next_retry_at", "retry at"),
        ("wake_at", "wakes at"),
        ("wait_event_type", "waiting for event"),
    ):
        if step.get(field):
            parts.append(f"{label} {step[field]}")
    if step.get("error"):
        parts.append(f"last error {json.dumps(step['error'])}")
    return ", ".join(parts)


def fmt_log(log: dict) -> str:
    where = f" [{log['step']}#{log.get('attempt') or 1}]" if log.get("step") else ""
    replay = " (replay)" if log.get("is_replay") else ""
    data = f" {json.dumps(log['data'])}" if log.get("data") else ""
    return (
        f"{log.get('created_at', '')} {log.get('level', '').upper():5} "
        f"{log.get('category', '')}{where}{replay}: {log.get('message', '')}{data}"
    )


# --- commands -------------------------------------------------------------------------------


def cmd_workflows_list(api: Api, args, out) -> None:
    data = api.call("GET", "workflows")
    if not data["workflows"]:
        print("no workflows registered", file=out)
    for wf in data["workflows"]:
        active = wf.get("active_version")
        print(
            f"{wf['name']}  versions={','.join(map(str, wf.get('versions', [])))}  "
            f"active={active if active is not None else 'none'}",
            file=out,
        )
        for sched in wf.get("schedules", []):
            state = "paused" if sched["paused"] else f"next {sched['next_fire_at']}"
            print(f"  schedule {sched['cron']!r} ({sched['timezone']}): {state}", file=out)


def cmd_instances_list(api: Api, args, out) -> None:
    cursor, shown = args.cursor, 0
    while True:
        data = api.call(
            "GET",
            f"workflows/{args.workflow}/instances",
            params={
                "status": args.status,
                "page_size": args.page_size,
                "cursor": cursor,
                "label": args.label,
            },
        )
        for row in data["instances"]:
            print(f"{row['id']}  {describe(row['details'])}", file=out)
            shown += 1
        cursor = data.get("cursor")
        if not (args.all and data.get("has_next_page")):
            break
    if not shown:
        print("no instances", file=out)
    if data.get("has_next_page") and not args.all:
        print(f"-- more: --cursor {cursor}", file=out)


def cmd_instances_get(api: Api, args, out) -> None:
    data = api.call("GET", instance_path(args))
    meta = data.get("meta", {})
    print(f"id:       {data['id']}", file=out)
    print(f"workflow: {meta.get('workflow_name')} v{meta.get('version')}", file=out)
    print(f"status:   {describe(data['details'])}", file=out)
    print(f"run:      {meta.get('run_number')}", file=out)
    print(f"current:  {wait_reason(meta.get('current_step'))}", file=out)
    if meta.get("labels"):
        print("labels:   " + ", ".join(f"{k}:{v}" for k, v in meta["labels"].items()), file=out)
    parent = data.get("parent")
    if parent:
        print(f"parent:   {parent['workflow']}/{parent['id']}", file=out)
    for child in data.get("children") or []:
        print(f"child:    {child['workflow']}/{child['id']}  {child['status']}", file=out)
    if args.full:
        for field in ("created_at", "started_at", "updated_at", "completed_at"):
            print(f"{field + ':':13} {meta.get(field) or '-'}", file=out)
        print("params:\n" + json.dumps(meta.get("params"), indent=2), file=out)
        if "output" in data["details"]:
            print("output:\n" + json.dumps(data["details"]["output"], indent=2), file=out)


def _history(api: Api, args, **extra) -> dict:
    return api.call(
        "GET",
        instance_path(args, "/history"),
        params={"run_number": getattr(args, "run", None), **extra},
    )


def cmd_instances_history(api: Api, args, out) -> None:
    data = _history(
        api,
        args,
        include_logs="true" if args.include_logs else None,
        log_level=args.log_level,
        log_category=args.log_category,
    )
    print(f"run {data.get('run_number')} steps:", file=out)
    for step in data["steps"]:
        error = f"  {json.dumps(step['error'])}" if step.get("error") else ""
        print(
            f"  {step.get('status', ''):10} {step.get('type', ''):15} {step['name']}"
            f"  attempts={step.get('attempts', 0)}{error}",
            file=out,
        )
    print("events:", file=out)
    for event in data["events"]:
        print(
            f"  {event.get('created_at', '')} {event['type']} {json.dumps(event.get('payload'))}",
            file=out,
        )
    if args.include_logs:
        print("logs:", file=out)
        for log in data.get("logs", []):
            print("  " + fmt_log(log), file=out)
    more = [n for n in ("steps", "events", "logs") if data.get(f"{n}_has_next_page")]
    if more:
        print(f"-- more {', '.join(more)} (use the HTTP API cursors)", file=out)


TERMINAL = {"complete", "errored", "terminated"}


def cmd_instances_logs(api: Api, args, out) -> None:
    # The last page has no next cursor, so a follower re-reads it on each poll: lines already
    # printed are recognised by id (ids only grow) and printed once. The status is read before
    # the logs: a follower stops after a pass that began with the instance finished, so the
    # lines written while it finished are printed.
    cursor, printed_up_to, finished = None, 0, not args.follow
    while True:
        if not finished:
            finished = api.call("GET", instance_path(args))["details"]["status"] in TERMINAL
        data = _history(api, args, include_logs="true", logs_cursor=cursor, page_size=100)
        for log in data.get("logs", []):
            if log["id"] > printed_up_to:
                print(fmt_log(log), file=out)
                printed_up_to = log["id"]
        out.flush()
        cursor = data.get("logs_cursor") or cursor
        if data.get("logs_has_next_page"):
            continue
        if finished:
            return
        time.sleep(args.interval)


def cmd_instances_create(api: Api, args, out) -> None:
    body = {}
    if args.id:
        body["id"] = args.id
    if args.params is not None:
        body["params"] = parse_json_arg(args.params, "--params")
    if args.label:
        body["labels"] = parse_labels(args.label)
    if args.version is not None:
        body["version"] = args.version
    if args.subject:
        body["subject"] = args.subject
    # A fresh key per call: a network retry inside httpx can't create a second instance, and
    # re-running the command with --idempotency-key K is safe.
    key = args.idempotency_key or uuid.uuid4().hex
    data = api.call(
        "POST",
        f"workflows/{args.workflow}/instances",
        body=body,
        headers={"Idempotency-Key": key},
    )
    print(f"created {data['id']}  {describe(data['details'])}", file=out)


def parse_labels(items: list[str]) -> dict[str, str]:
    labels = {}
    for item in items:
        key, sep, value = item.partition(":")
        if not sep:
            raise CliError(f"--label {item!r}: expected key:value", 2)
        labels[key] = value
    return labels


def cmd_instances_action(api: Api, args, out) -> None:
    body = {}
    if getattr(args, "from_step", None):
        body["from_step"] = args.from_step
    data = api.call("POST", instance_path(args, f"/{args.action}"), body=body)
    print(f"{args.action} {args.id}: {describe(data['details'])}", file=out)


def cmd_instances_send_event(api: Api, args, out) -> None:
    body = {"type": args.type}
    if args.payload is not None:
        body["payload"] = parse_json_arg(args.payload, "--payload")
    data = api.call("POST", instance_path(args, "/events"), body=body)
    print(f"sent {args.type} to {args.id}: {describe(data['details'])}", file=out)


# --- argument parsing -----------------------------------------------------------------------


def _sub(parent, name: str, key: str, help_text: str, func=None):
    parser = parent.add_parser(
        name,
        help=help_text,
        description=help_text,
        epilog=EXAMPLES.get(key, "") + "\n\n" + ENV_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if func:
        parser.set_defaults(func=func)
    return parser


def _instance_args(parser, with_id: bool = True) -> None:
    parser.add_argument("--workflow", "-w", required=True, help="workflow name")
    if with_id:
        parser.add_argument("--id", "-i", required=True, help="instance id")


def build_parser(extra_groups=()) -> argparse.ArgumentParser:
    """The parser; each of `extra_groups` is called with the top-level subparsers so another
    app's console commands can join this script without workflows knowing that app."""
    parser = argparse.ArgumentParser(
        prog="vitalflow-wf",
        description="Inspect and operate vitalflow workflows over the HTTP API.",
        epilog=EXAMPLES["root"] + "\n\n" + ENV_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--url", default=os.environ.get("VITALFLOW_URL"), help="API base URL")
    parser.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar='"NAME: VALUE"',
        help="extra header, repeatable (e.g. -H 'X-Admin-Key: vfk_...')",
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    names = ["workflows", "instances", *(getattr(g, "group_name", "") for g in extra_groups)]
    groups = parser.add_subparsers(
        dest="group", required=True, metavar="{" + ",".join(n for n in names if n) + "}"
    )

    wf = _sub(groups, "workflows", "workflows", "registered workflows and their versions")
    wf_cmds = wf.add_subparsers(dest="command", required=True)
    _sub(wf_cmds, "list", "workflows list", "list workflows", cmd_workflows_list)

    inst = _sub(groups, "instances", "instances", "workflow instances")
    cmds = inst.add_subparsers(dest="command", required=True)

    p = _sub(cmds, "list", "instances list", "list instances, newest first", cmd_instances_list)
    _instance_args(p, with_id=False)
    p.add_argument("--status", "-s", help="active|waiting|paused|errored|terminated|complete")
    p.add_argument("--page-size", type=int, default=50)
    p.add_argument("--cursor", help="continue from a previous page")
    p.add_argument("--all", action="store_true", help="follow cursors to the last page")
    p.add_argument("--label", "-l", action="append", help="key:value (repeatable; all must match)")

    p = _sub(cmds, "get", "instances get", "status and current step (or wait reason)")
    p.set_defaults(func=cmd_instances_get)
    _instance_args(p)
    p.add_argument("--full", action="store_true", help="also timestamps, params and output")

    p = _sub(cmds, "history", "instances history", "steps, events and optionally logs")
    p.set_defaults(func=cmd_instances_history)
    _instance_args(p)
    p.add_argument("--run", type=int, help="run number (default: the current run)")
    p.add_argument("--include-logs", action="store_true")
    p.add_argument("--log-level", help="debug|info|warn|error")
    p.add_argument("--log-category", help="e.g. workflow or system")

    p = _sub(cmds, "logs", "instances logs", "durable log lines of the current run")
    p.set_defaults(func=cmd_instances_logs)
    _instance_args(p)
    p.add_argument("--run", type=int, help="run number (default: the current run)")
    p.add_argument("--follow", "-f", action="store_true", help="keep polling until terminal")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between polls")

    p = _sub(cmds, "create", "instances create", "start a new instance", cmd_instances_create)
    _instance_args(p, with_id=False)
    p.add_argument("--id", "-i", help="instance id (default: generated by the server)")
    p.add_argument("--params", "-p", help="JSON params, e.g. '{\"a\": 1}'")
    p.add_argument("--idempotency-key", help="default: a fresh random key per call")
    p.add_argument("--label", "-l", action="append", help="key:value (repeatable, ≤ 10)")
    p.add_argument("--version", type=int, help="run this version, not the active one (canary)")
    p.add_argument("--subject", help="username of the user the work is for")

    helps = {"retry-now": "run the step waiting in backoff now", "skip-wait": "end a sleep now"}
    for action in ("pause", "resume", "restart", "terminate", "retry-now", "skip-wait"):
        p = _sub(cmds, action, f"instances {action}", helps.get(action, f"{action} an instance"))
        p.set_defaults(func=cmd_instances_action, action=action)
        _instance_args(p)
        if action == "restart":
            p.add_argument(
                "--from-step",
                help="keep the results of the steps completed before this one; run it and the rest",
            )

    p = _sub(cmds, "send-event", "instances send-event", "deliver an event to an instance")
    p.set_defaults(func=cmd_instances_send_event)
    _instance_args(p)
    p.add_argument("--type", "-t", required=True, help="event type")
    p.add_argument("--payload", help="JSON payload")
    for add_group in extra_groups:
        add_group(groups)
    return parser


def main(argv: list[str] | None = None, *, out=None, err=None, extra_groups=()) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    args = build_parser(extra_groups).parse_args(argv)
    try:
        if not args.url:
            raise CliError("no API URL: pass --url or set VITALFLOW_URL", 2)
        env_headers = os.environ.get("VITALFLOW_HEADERS", "").replace(";", "\n").splitlines()
        headers = parse_headers(env_headers + args.header)
        api = Api(args.url, headers, args.timeout)
        args.func(api, args, out)
    except CliError as exc:
        print(f"error: {exc}", file=err)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
