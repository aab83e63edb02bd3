"""`vitalflow-wf graphs …`: graph definitions and runs over HTTP (list, get, publish, run — a
canary with --version —, runs, events, disable, enable, approvers). Joins the workflows console script through its `extra_groups` hook; like it, this
module imports no Django and no models (graphs/__init__ loads names lazily)."""

import json
import sys
import uuid

from workflows import cli as wf
from workflows.cli_bulk import add_commands as bulk_commands

EXAMPLES = """examples:
  vitalflow-wf graphs list --name lab-out-of-range
  vitalflow-wf graphs get --name lab-out-of-range --version 2
  vitalflow-wf graphs publish --file demo/graphs/lab-out-of-range.json
  vitalflow-wf graphs run --binding lab-out-of-range --input '{"upload_id": "…"}'
  vitalflow-wf graphs run --binding lab-out-of-range --version 3 --input '{…}'   # a canary
  vitalflow-wf graphs disable --binding lab-out-of-range     # new runs 409; running ones go on
  vitalflow-wf graphs approvers --binding lab-out-of-range --group clinicians
  vitalflow-wf graphs runs --binding lab-out-of-range
  vitalflow-wf graphs events --run RUN_ID
  vitalflow-wf graphs events --run RUN_ID --type clinician_ack --payload '{"approved": true}'
  vitalflow-wf graphs events --run RUN_ID --type answer --token 0.2.0 --payload '{"ok": true}'"""


def _pages(api, path: str, key: str, params: dict, follow: bool):
    while True:
        data = api.call("GET", path, params=params)
        yield from data[key]
        if not (follow and data.get("has_next_page")):
            return
        params = {**params, "cursor": data["cursor"]}


def cmd_list(api, args, out) -> None:
    params = {"name": args.name, "tag": args.tag, "page_size": 200}
    for d in _pages(api, "graphs/definitions", "definitions", params, True):
        print(f"{d['name']}  v{d['version']}  {d['status']}  {d['checksum'][:12]}", file=out)


def cmd_get(api, args, out) -> None:
    data = api.call("GET", f"graphs/definitions/{args.name}/versions/{args.version}")
    print(json.dumps(data["document"] if args.document else data, indent=2, default=str), file=out)


def cmd_publish(api, args, out) -> None:
    if args.file:
        try:
            with open(args.file) as handle:
                document = json.load(handle)
        except (OSError, ValueError) as exc:
            raise wf.CliError(f"cannot read {args.file}: {exc}", 2) from None
        created = api.call("POST", "graphs/definitions", body=document)
        name, version = created["name"], created["version"]
    elif args.name and args.version:
        name, version = args.name, args.version
    else:
        raise wf.CliError("pass --file, or --name and --version of a draft", 2)
    data = api.call("POST", f"graphs/definitions/{name}/versions/{version}/publish")
    print(f"{data['name']} v{data['version']} {data['status']} {data['checksum'][:12]}", file=out)


def cmd_run(api, args, out) -> None:
    key = args.idempotency_key or uuid.uuid4().hex
    body = {"input": wf.parse_json_arg(args.input, "--input")}
    if args.version is not None:
        body["version"] = args.version
    if args.subject:
        body["subject"] = args.subject
    data = api.call(
        "POST", f"graphs/bindings/{args.binding}/runs", body=body, headers={"Idempotency-Key": key}
    )
    print(f"{data['id']}  {data['binding']} v{data['version']}  {data['status']}", file=out)


def cmd_runs(api, args, out) -> None:
    params = {"binding": args.binding, "tag": args.tag, "page_size": args.page_size}
    for r in _pages(api, "graphs/runs", "runs", params, args.all):
        print(
            f"{r['id']}  {r['binding']} v{r['version']}  {r['status']}  {r['created_at']}", file=out
        )


def cmd_events(api, args, out) -> None:
    path = f"graphs/runs/{args.run}/events"
    if args.type:
        body = {"type": args.type, "payload": wf.parse_json_arg(args.payload, "--payload")}
        if args.token:
            body["token"] = args.token
        data = api.call("POST", path, body=body)
        to = f" (token {args.token})" if args.token else ""
        taken = data.get("answer") or {}
        print(
            f"sent {args.type} to {args.run}{to}: {data['status']}; answered token "
            f"{taken.get('token')} ({taken.get('decision')})",
            file=out,
        )
        return
    for e in _pages(api, path, "events", {"page_size": 200}, True):
        where = f" {e['token']} {e['node']}" if e["token"] else ""
        data = "" if e["data"] is None else " " + json.dumps(e["data"], default=str)[:200]
        print(f"#{e['sequence_number']:<4} {e['type']}{where}{data}", file=out)


def cmd_enable(api, args, out) -> None:
    verb = "enable" if args.command == "enable" else "disable"
    data = api.call("POST", f"graphs/bindings/{args.binding}/{verb}")
    state = "enabled" if data["enabled"] else "disabled: new runs are refused"
    print(f"{data['name']}  {state}", file=out)


def cmd_approvers(api, args, out) -> None:
    group = None if args.none else args.group
    if group is None and not args.none:
        raise wf.CliError("pass --group NAME, or --none for the global approvers only", 2)
    data = api.call("POST", f"graphs/bindings/{args.binding}/approvers", body={"group": group})
    who = f"group {data['approvers']}" if data["approvers"] else "global approvers only"
    print(f"{data['name']}  human nodes answered by {who}", file=out)


def add_commands(groups) -> None:
    graphs = wf._sub(groups, "graphs", "graphs", "graph definitions and runs")
    graphs.epilog = EXAMPLES + "\n\n" + wf.ENV_HELP
    cmds = graphs.add_subparsers(dest="command", required=True)
    p = wf._sub(cmds, "list", "graphs list", "definition versions, newest first", cmd_list)
    p.add_argument("--name", help="only this definition")
    p.add_argument("--tag", help="only versions with this tag")
    p = wf._sub(cmds, "get", "graphs get", "one version", cmd_get)
    p.add_argument("--name", required=True)
    p.add_argument("--version", type=int, required=True)
    p.add_argument("--document", action="store_true", help="only the JSON document")
    p = wf._sub(cmds, "publish", "graphs publish", "publish a draft (or a file)", cmd_publish)
    p.add_argument("--file", help="create a draft from this JSON file, then publish it")
    p.add_argument("--name")
    p.add_argument("--version", type=int)
    p = wf._sub(cmds, "run", "graphs run", "start a run of a binding", cmd_run)
    p.add_argument("--binding", "-b", required=True)
    p.add_argument("--input", help="JSON input")
    p.add_argument(
        "--version", type=int, help="a canary: run this published version, not the binding's"
    )
    p.add_argument("--subject", help="username of the user the run is about")
    p.add_argument("--idempotency-key", help="default: a fresh random key per call")
    p = wf._sub(cmds, "runs", "graphs runs", "runs, newest first", cmd_runs)
    p.add_argument("--binding", "-b")
    p.add_argument("--tag", help="only runs of versions with this tag")
    p.add_argument("--page-size", type=int, default=50)
    p.add_argument("--all", action="store_true", help="follow cursors to the last page")
    p = wf._sub(cmds, "events", "graphs events", "a run's events, or send one", cmd_events)
    p.add_argument("--run", "-r", required=True)
    p.add_argument("--type", "-t", help="send an event of this type instead of listing")
    p.add_argument("--payload", help="JSON payload of the event to send")
    p.add_argument("--token", help="answer only this token's waiting human node")
    for verb, what in (("disable", "refuse new runs of a binding"), ("enable", "allow them")):
        p = wf._sub(cmds, verb, f"graphs {verb}", what, cmd_enable)
        p.add_argument("--binding", "-b", required=True)
    p = wf._sub(
        cmds, "approvers", "graphs approvers", "who answers a binding's human nodes", cmd_approvers
    )
    p.add_argument("--binding", "-b", required=True)
    p.add_argument("--group", help="the group whose staff members answer them")
    p.add_argument("--none", action="store_true", help="no group: the global approvers only")


add_commands.group_name = "graphs"


def main(argv=None, *, out=None, err=None) -> int:
    return wf.main(argv, out=out, err=err, extra_groups=[bulk_commands, add_commands])


if __name__ == "__main__":
    sys.exit(main())
