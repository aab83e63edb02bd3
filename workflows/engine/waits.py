"""A run's sleeps and event waits (step.sleep, sleep_until, wait_for_event): the part of
Execution (execute.py) that suspends a run until a time or an event."""

from datetime import UTC, datetime, timedelta

from workflows import decisions, limits, runtime
from workflows.decisions import StepState
from workflows.engine import storage_faults
from workflows.errors import InvalidStep, WaitForEventTimeout
from workflows.models import StepStatus, StepType, TaskKind
from workflows.models import WorkflowEvent as EventRow


class Waits:
    """Mixed into Execution, whose state (steps, pending, events, claim) these methods use."""

    # -- sleeps ------------------------------------------------------------------------------

    def sleep(self, name, duration) -> None:
        self._sleep(name, lambda now: now + timedelta(milliseconds=limits.sleep_ms(duration)))

    def sleep_until(self, name, when) -> None:
        self._sleep(name, lambda now: _until(when, now))

    def _sleep(self, name, wake_at_for) -> None:
        limits.check_step_name(name)
        state = self._existing(name, StepType.SLEEP)
        now = runtime.now()
        if state is not None and state.status == StepStatus.COMPLETE:
            return
        if state is None:
            self.replaying = False
            state = StepState(
                name=name,
                type=StepType.SLEEP,
                status=StepStatus.SLEEPING,
                wake_at=wake_at_for(now),
                started_at=now,
            )
            self._stage(state)
        if decisions.sleep_due(state.wake_at, now):
            self.replaying = False  # from here on, this execution is new work
            state.status, state.completed_at = StepStatus.COMPLETE, now
            self._stage(state)
            self._trace_wait(state, "sleep")
            return
        self._trace_wait(state, "sleep")
        raise self._signal(state.wake_at, TaskKind.WAKE)

    # -- events ------------------------------------------------------------------------------

    def wait_for_event(self, name, *, type, timeout):  # noqa: A002
        limits.check_step_name(name)
        limits.check_event_type(type)
        timeout_ms = decisions.wait_timeout_ms(timeout)
        state = self._existing(name, StepType.WAIT_FOR_EVENT)
        self._count(name)
        if state is not None and state.status == StepStatus.COMPLETE:
            return EventResult(state.result)
        if state is not None and state.status == StepStatus.TIMED_OUT:
            raise WaitForEventTimeout(f"no {type!r} event for step {name!r} in time")
        now = runtime.now()
        if state is None:
            self.replaying = False
            state = StepState(
                name=name,
                type=StepType.WAIT_FOR_EVENT,
                status=StepStatus.WAITING,
                wake_at=now + timedelta(milliseconds=timeout_ms),
                wait_event_type=type,
                started_at=now,
            )
            self._stage(state)
        event = self._take_event(type)
        if event is not None:
            self.replaying = False
            state.status, state.completed_at = StepStatus.COMPLETE, now
            state.result = {
                "type": event["type"],
                "payload": event["payload"],
                "timestamp": event["created_at"].isoformat(),
            }
            self.pending.consumed.append((event["pk"], name))
            self._stage(state)
            self._trace_wait(state, "event")
            return EventResult(state.result)
        if state.wake_at <= now:
            self.replaying = False
            state.status, state.completed_at = StepStatus.TIMED_OUT, now
            state.error = {"name": "WaitForEventTimeout", "message": f"no {type!r} event"}
            self._stage(state)
            self._trace_wait(state, "event")
            raise WaitForEventTimeout(f"no {type!r} event for step {name!r} in time")
        self._trace_wait(state, "event")
        raise self._signal(state.wake_at, TaskKind.WAKE, wait_event_type=type)

    def _take_event(self, event_type: str) -> dict | None:
        if self.events is None:
            with storage_faults.guarded():
                self.events = self._load_events()
        for i, event in enumerate(self.events):
            if event["type"] == event_type:
                return self.events.pop(i)
        return None

    def _load_events(self) -> list[dict]:
        return list(
            EventRow.objects.filter(
                instance_id=self.claim.instance_pk,
                run_number=self.claim.run_number,
                consumed_at__isnull=True,
            )
            .order_by("id")
            .values("pk", "type", "payload", "created_at")
        )


class EventResult(dict):
    """{"type", "payload", "timestamp"}, also readable as attributes (report.payload)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _until(when, now: datetime) -> datetime:
    """sleep_until's wake time, at most WORKFLOWS_SLEEP_MAX from now."""
    at = _aware(when)
    ahead_ms = (at - now).total_seconds() * 1000
    limits.check_sleep_ms(
        int(ahead_ms), what=f"sleep_until {at.isoformat()} ({ahead_ms:.0f} ms ahead)"
    )
    return at


def _aware(when) -> datetime:
    if isinstance(when, str):
        when = datetime.fromisoformat(when)
    if not isinstance(when, datetime):
        raise InvalidStep(f"sleep_until needs a datetime, got {when!r}")
    return when if when.tzinfo else when.replace(tzinfo=UTC)
