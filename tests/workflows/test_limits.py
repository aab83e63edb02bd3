"""Every documented limit is a WORKFLOWS_* setting with a default, checked where the author calls
the engine (step.do / sleep / log / wait_for_event, create, send_event), and refused with an error
that names the limit and its value."""

import pytest
from django.core.exceptions import ImproperlyConfigured

import tests.workflows.limits_workflows  # noqa: F401 - registers limit-probe
from tests.workflows.test_http_support import ALL_SCOPES, create, instance_url, new_key
from workflows import limits, services
from workflows.errors import InvalidEventType, InvalidInstanceId, InvalidPayload
from workflows.models import WorkflowLog, WorkflowStep


def probe(harness, instance_id: str, **params) -> dict:
    harness.create("limit-probe", instance_id, params)
    return harness.status("limit-probe", instance_id)


def refused_with(status: dict, *fragments: str) -> None:
    assert status["status"] == "errored", status
    assert status["error"]["name"] == "InvalidStep", status
    for fragment in fragments:
        assert fragment in status["error"]["message"], status["error"]["message"]


# -- step.log ------------------------------------------------------------------------------------


def test_a_log_category_over_the_limit_is_refused_naming_the_limit(harness):
    status = probe(harness, "c1", call="log", category="c" * 65)
    refused_with(status, "log category", "65 characters", "64 (WORKFLOWS_LOG_CATEGORY_MAX)")
    assert not WorkflowLog.objects.filter(category="c" * 65).exists()


def test_a_log_category_at_the_limit_is_stored(harness):
    assert probe(harness, "c2", call="log", category="c" * 64)["status"] == "complete"
    assert WorkflowLog.objects.filter(category="c" * 64).exists()


def test_the_log_category_limit_is_a_setting(harness, settings):
    settings.WORKFLOWS_LOG_CATEGORY_MAX = 8
    refused_with(
        probe(harness, "c3", call="log", category="c" * 9), "8 (WORKFLOWS_LOG_CATEGORY_MAX)"
    )


@pytest.mark.parametrize("category", ["", "a<NUL>b", "system"])
def test_an_empty_nul_or_reserved_log_category_is_refused(harness, category):
    refused_with(probe(harness, f"c-{len(category)}", call="log", category=category), "categor")


def test_a_log_message_over_the_limit_is_refused_naming_the_limit(harness, settings):
    settings.WORKFLOWS_LOG_MESSAGE_MAX = 10
    status = probe(harness, "m1", call="log", message="m" * 11)
    refused_with(status, "log message is 11 characters", "10 (WORKFLOWS_LOG_MESSAGE_MAX)")


def test_a_log_message_with_a_nul_is_refused(harness):
    refused_with(probe(harness, "m2", call="log", message="a<NUL>b"), "NUL")


# -- sleeps --------------------------------------------------------------------------------------


def test_a_sleep_of_400_days_is_refused(harness):
    status = probe(harness, "s1", call="sleep", duration="400 days")
    refused_with(status, "'400 days'", "365 days (WORKFLOWS_SLEEP_MAX)")
    assert not WorkflowStep.objects.filter(name="nap").exists()


def test_a_sleep_of_365_days_is_accepted(harness):
    assert probe(harness, "s2", call="sleep", duration="365 days")["status"] == "waiting"


def test_a_sleep_until_more_than_the_limit_ahead_is_refused(harness):
    refused_with(probe(harness, "s3", call="sleep_until", days=400), "WORKFLOWS_SLEEP_MAX")


def test_the_sleep_limit_is_a_setting(harness, settings):
    settings.WORKFLOWS_SLEEP_MAX = "7 days"
    refused_with(
        probe(harness, "s4", call="sleep", duration="8 days"), "7 days (WORKFLOWS_SLEEP_MAX)"
    )


# -- step.do -------------------------------------------------------------------------------------


def test_a_step_name_over_the_limit_is_refused_naming_the_limit(harness, settings):
    settings.WORKFLOWS_STEP_NAME_MAX = 16
    status = probe(harness, "n1", call="do", name="n" * 17)
    refused_with(status, "step name is 17 characters", "16 (WORKFLOWS_STEP_NAME_MAX)")


def test_a_step_name_with_a_nul_is_refused(harness):
    refused_with(probe(harness, "n2", call="do", name="a<NUL>b"), "NUL")


def test_a_step_timeout_over_the_limit_is_refused(harness):
    status = probe(harness, "t1", call="do", options={"timeout": "400 days"})
    refused_with(status, "step timeout", "365 days (WORKFLOWS_STEP_TIMEOUT_MAX)")


def test_a_step_timeout_of_zero_is_refused(harness):
    refused_with(probe(harness, "t2", call="do", options={"timeout": 0}), "step timeout")


@pytest.mark.parametrize("option", ["delay", "max_delay"])
def test_a_retry_delay_over_the_limit_is_refused(harness, settings, option):
    settings.WORKFLOWS_RETRY_DELAY_MAX = "1 hour"
    status = probe(harness, f"r-{option}", call="do", options={"retries": {option: "2 hours"}})
    refused_with(status, f"retries.{option}", "1 hour (WORKFLOWS_RETRY_DELAY_MAX)")


def test_exponential_backoff_stops_growing_at_the_retry_delay_limit(settings):
    from workflows import decisions

    settings.WORKFLOWS_RETRY_DELAY_MAX = "1 minute"
    policy = decisions.retry_policy({"limit": 50, "delay": "10 seconds"})
    assert decisions.retry_delay_ms(policy, 30) == 60_000


def test_the_steps_per_run_limit_is_a_setting(harness, settings):
    settings.WORKFLOWS_STEPS_PER_RUN_MAX = 3
    status = probe(harness, "k1", call="steps", count=4)
    refused_with(status, "at most 3 steps (WORKFLOWS_STEPS_PER_RUN_MAX)")
    assert probe(harness, "k2", call="steps", count=3)["status"] == "complete"


# -- events --------------------------------------------------------------------------------------


def test_the_wait_for_event_timeout_limits_are_settings(harness, settings):
    settings.WORKFLOWS_WAIT_TIMEOUT_MAX = "1 hour"
    status = probe(harness, "w1", call="wait", timeout="2 hours")
    refused_with(status, "1 second … 1 hour", "WORKFLOWS_WAIT_TIMEOUT_MAX")


def test_an_event_type_over_the_limit_is_refused_at_wait_for_event(harness, settings):
    settings.WORKFLOWS_EVENT_TYPE_MAX = 5
    status = harness.status(
        "limit-probe",
        harness.create(
            "limit-probe", "w2", {"call": "wait", "type": "sixsix", "timeout": "1 hour"}
        ),
    )
    assert status["status"] == "errored"
    assert "5 (WORKFLOWS_EVENT_TYPE_MAX)" in status["error"]["message"]


def test_an_event_type_over_the_limit_is_refused_at_send_event(harness, settings):
    harness.create("limit-probe", "w3", {"call": "wait", "timeout": "1 hour"})
    settings.WORKFLOWS_EVENT_TYPE_MAX = 5
    with pytest.raises(InvalidEventType, match=r"5 \(WORKFLOWS_EVENT_TYPE_MAX\)"):
        harness.send_event("limit-probe", "w3", "sixsix")


def test_an_event_payload_over_the_json_limit_is_refused_at_send_event(harness, settings):
    harness.create("limit-probe", "w4", {"call": "wait", "timeout": "1 hour"})
    settings.WORKFLOWS_JSON_MAX_BYTES = 100
    with pytest.raises(InvalidPayload, match=r"100 bytes \(WORKFLOWS_JSON_MAX_BYTES\)"):
        harness.send_event("limit-probe", "w4", "ping", {"blob": "x" * 200})


# -- create --------------------------------------------------------------------------------------


def test_an_instance_id_over_the_limit_is_refused_at_create(db, settings):
    settings.WORKFLOWS_INSTANCE_ID_MAX = 10
    with pytest.raises(InvalidInstanceId, match=r"10 \(WORKFLOWS_INSTANCE_ID_MAX\)"):
        services.instance_create(workflow_name="limit-probe", instance_id="i" * 11)


def test_the_api_refuses_params_over_the_json_limit_with_a_code(operator_api, settings):
    settings.WORKFLOWS_JSON_MAX_BYTES = 100
    api = operator_api(*ALL_SCOPES, name="oncall")
    response = create(api, id="big", params={"blob": "x" * 200})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_payload"
    assert "WORKFLOWS_JSON_MAX_BYTES" in response.json()["message"]


def test_the_api_refuses_an_event_type_over_the_limit_with_a_code(operator_api, settings):
    api = operator_api(*ALL_SCOPES, name="oncall")
    assert create(api, id="ev").status_code == 201
    settings.WORKFLOWS_EVENT_TYPE_MAX = 5
    response = api.post(
        instance_url("ev", "/events"),
        {"type": "sixsix"},
        format="json",
        HTTP_IDEMPOTENCY_KEY=new_key(),
    )
    assert (response.status_code, response.json()["code"]) == (400, "invalid_event_type")


# -- the settings themselves -----------------------------------------------------------------------


def test_every_limit_has_a_documented_default_in_settings():
    from django.conf import settings

    for name, default in limits.DEFAULTS.items():
        assert limits.value(name) == default, name
        assert hasattr(settings, name), name


@pytest.mark.parametrize("bad", [0, -1, "soon"])
def test_a_limit_setting_that_is_not_positive_is_refused_loudly(settings, bad):
    settings.WORKFLOWS_STEP_NAME_MAX = bad
    with pytest.raises(ImproperlyConfigured, match="WORKFLOWS_STEP_NAME_MAX"):
        limits.value("WORKFLOWS_STEP_NAME_MAX")
