"""The help texts of vitalflow-wf (workflows.cli): its environment and an example per command.
Plain strings: the console script imports no Django."""

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
EXAMPLES["instances bulk"] = """examples:
  vitalflow-wf instances bulk restart --workflow lab-report --status errored --newer-than 1h \\
      --dry-run
  vitalflow-wf instances bulk restart --workflow lab-report --status errored --newer-than 1h --wait"""
