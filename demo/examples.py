"""An example workflow that `make run` starts so the demo console shows instances moving through
sleep, event wait and completion. Loaded through WORKFLOWS_MODULES (by default in demo mode);
nothing else depends on it. params: {"user", "confirm_within": how long to wait for the event}."""

from workflows import WaitForEventTimeout, workflow

DEFAULT_GOAL_STEPS = 8000


@workflow(name="demo-onboarding")
def demo_onboarding(event, step):
    params = event.payload or {}
    user = params.get("user", "demo")
    profile = step.do("load profile", lambda: {"user": user, "goal_steps": DEFAULT_GOAL_STEPS})
    step.log.info("profile loaded", {"goal_steps": profile["goal_steps"]})
    step.sleep("let the first data arrive", "20 seconds")
    try:
        confirmation = step.wait_for_event(
            "goal confirmed",
            type="goal_confirmed",
            timeout=params.get("confirm_within", "2 minutes"),
        )
        goal = (confirmation["payload"] or {}).get("goal_steps", profile["goal_steps"])
    except WaitForEventTimeout:
        step.log.warn("no confirmation in time; keeping the default goal")
        goal = profile["goal_steps"]
    return step.do("set goal", lambda: {"user": user, "goal_steps": goal})
