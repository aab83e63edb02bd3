"""Noticing code that changed under a running instance (docs/workflows/faults.md).

ReplayGuard: every step name a replay asks for is checked against the run's stored history
(decisions.replay_divergence); a divergence unwinds the run with Diverged before anything new
runs, and the instance ends `errored` with NonDeterminismError. `fingerprint_check` compares
the fingerprint of the code a run started on with the code running now: a change is only
reported (a `system` warning, once per new fingerprint), it never stops the run.
"""

from workflows import decisions
from workflows.decisions import StepState
from workflows.errors import NonDeterminismError
from workflows.models import WorkflowLog
from workflows.step import Diverged

CODE_CHANGED = "code changed since this instance started"


class ReplayGuard:
    def __init__(self, stored: dict[str, StepState]):
        # dict order is storage order (claim loads steps by id)
        self.recorded = [
            name
            for name, state in stored.items()
            if state.status in decisions.FINISHED_STEP_STATUSES
        ]
        self.stored = set(stored)
        self.asked: set[str] = set()
        self.clear_scopes: set[str] = set()  # every recorded step of the scope asked already
        self.diverged: Diverged | None = None

    def ask(self, name: str) -> None:
        """Record that the replay asks for `name`; raise Diverged when that leaves the history."""
        if self.diverged is not None:  # swallowed once (bare except): still nothing new runs
            raise self.diverged
        self.asked.add(name)
        if name in self.stored or not self.recorded:
            return
        scope = decisions.location_scope(name)
        if scope in self.clear_scopes:  # `asked` only grows: a clear scope stays clear
            return
        expected = decisions.replay_divergence(self.recorded, self.asked, name)
        if expected is None:
            self.clear_scopes.add(scope)
            return
        self.diverged = Diverged(NonDeterminismError(expected=expected, requested=name))
        raise self.diverged


def fingerprint_check(*, stored: str, current: str, instance_pk: int, run_number: int):
    """(fingerprint to record or None, warning to log or None) for a run being executed."""
    if stored == current:
        return None, None
    if not stored:  # the run starts now (or began before fingerprints were recorded)
        return current, None
    if _warned(instance_pk, run_number, current):
        return None, None
    return None, f"{CODE_CHANGED} (code fingerprint {stored[:12]} → {current[:12]})"


def _warned(instance_pk: int, run_number: int, current: str) -> bool:
    """Rare path (code changed): one read so a long-lived instance warns once, not per wake."""
    return WorkflowLog.objects.filter(
        instance_id=instance_pk,
        run_number=run_number,
        category="system",
        message__startswith=CODE_CHANGED,
        message__contains=f"→ {current[:12]}",
    ).exists()
