"""Workflows with cron schedules for the trigger tests. Importing registers them:
runner subprocesses load this module through WORKFLOWS_MODULES; in the test process the
`cron_fleet` fixture registers them for one test and removes them again."""

from workflows import workflow

NAMES = ("cron-quarter", "cron-berlin", "cron-minutely")


@workflow(name="cron-quarter", schedules=["*/15 * * * *", "0 * * * *"])
def quarter(event, step):
    return step.do("echo", lambda: event.payload)


@workflow(name="cron-berlin", schedules=["0 9 * * *"], schedule_timezone="Europe/Berlin")
def berlin(event, step):
    return step.do("echo", lambda: event.payload["scheduled_time"])


@workflow(name="cron-minutely", schedules=["* * * * *"])
def minutely(event, step):
    return step.do("echo", lambda: event.payload["scheduled_time"])
