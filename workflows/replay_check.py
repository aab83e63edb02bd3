"""check-replay: replay the stored history of every live instance against the code deployed now,
running no step, and name those whose next replay would raise NonDeterminismError (or fail), so
an operator knows before a deploy which instances an edit breaks.

The replay is the runner's own (engine/execute.py), with one difference: any write ends it. A
step whose body would run, a sleep or wait that would suspend, an ending, all reach a boundary
commit first, and here a commit is a stop, not a write; the whole check also runs in a
transaction that is rolled back. Code between steps does run, as on every replay (the rules of
workflows: no side effects outside steps).
"""

import contextlib
from dataclasses import dataclass

from django.db import transaction

from workflows.authoring import registry
from workflows.decisions import StepState
from workflows.engine.claim import _STEP_FIELDS, Claim, Loaded
from workflows.engine.execute import Execution
from workflows.engine.results import roundtrip
from workflows.models import Status, TaskKind, WorkflowInstance, WorkflowStep

LIVE = (Status.ACTIVE, Status.WAITING, Status.PAUSED)

DIVERGES = "diverges"  # the replay would raise NonDeterminismError
FAILS = "fails"  # the replay would fail the instance another way (code now raises)
VERSION_MISSING = "version_missing"  # its version is not in this deployment's code
REPLAYS = "replays"  # the history replays; new work would start where it stops


@dataclass(frozen=True)
class Finding:
    workflow: str
    instance_id: str
    run_number: int
    version: int
    verdict: str
    reason: str = ""
    code_changed: bool = False  # its run started on other code (fingerprint), replays or not


class _Stop(BaseException):  # noqa: N818 - a control-flow signal, not an error
    """The replay reached a boundary: what follows is new work, not history."""


class _DryExecution(Execution):
    """An Execution whose boundaries stop the replay instead of writing; the outcome it was
    about to commit says how the replay ended."""

    failed: dict | None = None

    def _commit(self, outcome):
        raise _Stop()

    def _fail_with(self, error: dict) -> str:
        self.failed = error
        raise _Stop()


def check(*, workflow_name: str | None = None) -> list[Finding]:
    """One Finding per live instance (of `workflow_name`, or of every workflow), oldest first."""
    rows = WorkflowInstance.objects.filter(status__in=LIVE).order_by("id")
    if workflow_name:
        rows = rows.filter(workflow_name=workflow_name)
    return [_check_one(row) for row in rows.iterator()]


def _check_one(row: WorkflowInstance) -> Finding:
    found = {
        "workflow": row.workflow_name,
        "instance_id": row.instance_id,
        "run_number": row.run_number,
        "version": row.version,
    }
    definition = registry.get(row.workflow_name, row.version)
    if definition is None:
        return Finding(**found, verdict=VERSION_MISSING, reason="version not registered here")
    with transaction.atomic():  # nothing is written; rolled back all the same
        execution = _DryExecution(*_load(row), definition, threaded=False, budget=None)
        with contextlib.suppress(_Stop):
            execution.run()
        transaction.set_rollback(True)
    changed = bool(row.code_fingerprint) and row.code_fingerprint != execution.fingerprint
    found["code_changed"] = changed
    if execution.guard.diverged is not None:
        reason = f"NonDeterminismError: {execution.guard.diverged.error}"
        return Finding(**found, verdict=DIVERGES, reason=reason)
    if execution.failed is not None:
        error = execution.failed
        return Finding(**found, verdict=FAILS, reason=f"{error['name']}: {error['message']}")
    return Finding(**found, verdict=REPLAYS)


def _load(row: WorkflowInstance) -> tuple[Claim, Loaded]:
    """What a claim of the instance would load, without claiming it."""
    claim = Claim(
        task_pk=0,
        instance_pk=row.pk,
        run_number=row.run_number,
        fencing_token=0,
        kind=TaskKind.RESUME,
        owner="check-replay",
        lease_seconds=0,
    )
    steps = WorkflowStep.objects.filter(instance_id=row.pk, run_number=row.run_number)
    loaded = Loaded(
        workflow_name=row.workflow_name,
        instance_id=row.instance_id,
        version=row.version,
        params=roundtrip(row.params),
        created_at=row.created_at,
        request_id=row.request_id,
        code_fingerprint=row.code_fingerprint,
        has_parent=row.parent_id is not None,
        steps={
            values["name"]: StepState(**values)
            for values in steps.order_by("id").values(*_STEP_FIELDS)
        },
    )
    return claim, loaded


def report(findings: list[Finding]) -> list[str]:
    """The command's lines: one per instance that would not replay, then a summary."""
    lines = [
        f"{f.workflow}/{f.instance_id} run {f.run_number} v{f.version}: {f.reason}"
        for f in findings
        if f.verdict in (DIVERGES, FAILS)
    ]
    diverging = sum(f.verdict == DIVERGES for f in findings)
    failing = sum(f.verdict == FAILS for f in findings)
    missing = sum(f.verdict == VERSION_MISSING for f in findings)
    changed = sum(f.code_changed and f.verdict == REPLAYS for f in findings)
    workflows = len({f.workflow for f in findings})
    summary = (
        f"checked {len(findings)} live instance(s) of {workflows} workflow(s): "
        f"{diverging} would raise NonDeterminismError, {failing} would fail"
    )
    if missing:
        summary += f", {missing} not checked (version not registered here)"
    if changed:
        summary += f"; {changed} run on changed code and still replay"
    return [*lines, summary]
