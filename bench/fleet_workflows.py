"""Workflows the fleet sections of bench/workflows.py load into runner processes (through
WORKFLOWS_MODULES=bench.fleet_workflows): CRON_WORKFLOWS copies of a minutely cron workflow, so
one minute gives that many fire-lateness samples."""

from workflows import workflow

CRON_WORKFLOWS = 30


def _echo(event, step):
    return step.do("echo", lambda: event.payload["scheduled_time"])


for _n in range(CRON_WORKFLOWS):
    workflow(name=f"bench-cron-{_n}", schedules=["* * * * *"])(_echo)
