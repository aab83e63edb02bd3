"""WorkflowHarness: run workflows in tests with a controllable clock, seeded ids, no server and
no cluster. Works with pytest-django's `db` fixture on SQLite and PostgreSQL.

    def test_reminder(db):
        with WorkflowHarness(start=datetime(2026, 1, 1, tzinfo=UTC)) as h:
            h.create("reminder", id="r1", params={"to": "ann"})   # runs until it sleeps
            h.advance("1 day")                                   # moves the clock, runs due work
            assert h.status("reminder", "r1") == {"status": "complete", "output": "sent"}

Step callbacks run inline in the test's thread (so they see the test's database transaction);
an attempt that takes longer than its timeout still fails with StepTimeout afterwards.
"""

from datetime import UTC, datetime

from django.conf import settings

from workflows import durations, runtime, selectors, services
from workflows.engine import run_one
from workflows.engine.execute import Budget

MAX_TASKS_PER_RUN = 10_000  # a workflow that never goes idle is a bug; fail instead of hanging


class WorkflowHarness:
    def __init__(self, start: datetime | None = None, *, seed: int = 0):
        self.runtime = runtime.ManualRuntime(start or datetime(2026, 1, 1, tzinfo=UTC), seed=seed)
        self._previous = runtime.install(self.runtime)
        self._wake_setting = getattr(settings, "WORKFLOWS_WAKE_TASKS", None)
        settings.WORKFLOWS_WAKE_TASKS = False  # the harness runs work itself
        self.owner = "harness"
        from workflows import triggers

        triggers.gate.reset()  # schedule rows of an earlier test were rolled back

    def close(self) -> None:
        runtime.install(self._previous)
        if self._wake_setting is None:
            del settings.WORKFLOWS_WAKE_TASKS
        else:
            settings.WORKFLOWS_WAKE_TASKS = self._wake_setting

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- time and running ----------------------------------------------------------------------

    def now(self) -> datetime:
        return self.runtime.now()

    def tick(self, max_steps: int | None = None) -> str | None:
        """Run one due task (optionally at most `max_steps` step attempts); None if none was due."""
        return run_one(owner=self.owner, threaded=False, budget=Budget(max_steps))

    def run_until_idle(self) -> int:
        """Run due work at the current clock until nothing is due; returns tasks run."""
        for count in range(MAX_TASKS_PER_RUN):
            if self.tick() is None:
                return count
        raise RuntimeError("workflows never went idle; is a step retrying with no delay?")

    def advance(self, duration) -> int:
        """Move the clock by `duration` (ms, timedelta or "2 hours"), then run due work."""
        self.runtime.advance(durations.to_timedelta(duration))
        return self.run_until_idle()

    # -- instances -------------------------------------------------------------------------------

    def create(
        self,
        name: str,
        id: str | None = None,  # noqa: A002
        params=None,
        *,
        run: bool = True,
        priority: int = 5,
        labels: dict | None = None,
        subject=None,
    ) -> str:
        """Create an instance (of the active version) and run until idle; returns its id."""
        row = services.instance_create(
            workflow_name=name,
            instance_id=id,
            params=params,
            priority=priority,
            labels=labels,
            subject=subject,
        )
        if run:
            self.run_until_idle()
        return row.instance_id

    def instance(self, name: str, instance_id: str):
        return selectors.instance_get(workflow_name=name, instance_id=instance_id)

    def send_event(self, name: str, instance_id: str, type: str, payload=None, *, run: bool = True):  # noqa: A002
        services.instance_send_event(
            instance=self.instance(name, instance_id), type=type, payload=payload
        )
        if run:
            self.run_until_idle()

    def pause(self, name: str, instance_id: str) -> None:
        services.instance_pause(instance=self.instance(name, instance_id))

    def resume(self, name: str, instance_id: str, *, run: bool = True) -> None:
        services.instance_resume(instance=self.instance(name, instance_id))
        if run:
            self.run_until_idle()

    def terminate(self, name: str, instance_id: str) -> None:
        services.instance_terminate(instance=self.instance(name, instance_id))

    def restart(
        self, name: str, instance_id: str, *, from_step: str | None = None, run: bool = True
    ) -> None:
        services.instance_restart(instance=self.instance(name, instance_id), from_step=from_step)
        if run:
            self.run_until_idle()

    # -- inspection ------------------------------------------------------------------------------

    def status(self, name: str, instance_id: str) -> dict:
        return services.instance_status(instance=self.instance(name, instance_id))

    def history(self, name: str, instance_id: str, run_number: int | None = None) -> dict:
        """{"steps": [...], "events": [...], "logs": [...]} of one run as plain dicts."""
        instance = self.instance(name, instance_id)
        found = selectors.instance_history(instance=instance, run_number=run_number)
        return {
            "steps": list(
                found["steps"].values(
                    "name",
                    "type",
                    "status",
                    "attempts",
                    "result",
                    "error",
                    "wake_at",
                    "next_retry_at",
                    "wait_event_type",
                )
            ),
            "events": list(
                found["events"].values("type", "payload", "consumed_at", "consumed_by_step")
            ),
            "logs": list(
                found["logs"].values(
                    "level", "category", "message", "data", "step_name", "attempt", "is_replay"
                )
            ),
        }
