"""A run whose step-boundary write the database refused for its values (decisions.refused_value):
the part of Execution (execute.py) that fails the instance at once with the refusal."""

from workflows import decisions, runtime
from workflows.step import Refused


class Refusals:
    """Mixed into Execution, whose pending boundary, _stage and _fail_with these methods use."""

    def _fail_refused(self, error: dict) -> str:
        """Fail the instance with the database's refusal at once instead of leaving the run to
        be claimed again (and refused again) until it counts as a crash loop. Nothing of the
        refused boundary was written; its logs are dropped and its steps stored as
        decisions.refused_boundary_steps says, more strictly while the failure is refused too,
        and at last the failure alone."""
        self.refused = None
        fingerprint, staged = self.pending.fingerprint, list(self.pending.steps.values())
        mutated, now = bool(self.pending.mutations), runtime.now()
        for strict, keep in ((False, True), (True, True), (True, False)):
            self.pending.clear()
            self.pending.fingerprint = fingerprint
            for state in decisions.refused_boundary_steps(
                staged if keep else (), error, now, strict=strict, mutated=mutated
            ):
                self._stage(state)
            try:
                return self._fail_with(error)
            except Refused:
                self.refused = None
        raise RuntimeError(f"the database refused even the instance's failure: {error}")
