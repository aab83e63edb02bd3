"""Limits on who can hammer the service: API throttles per key / user / anonymous IP (429
{"code": "throttled"} + Retry-After), the admin login lockout per username + IP, bounded
auditing of failed logins and rejected credentials, and /v1/me's spaced Terra reconcile."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

from ops.models import AuditLog
from ops.services import AUDIT_FLOOD_PER_IP
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def rates(settings):
    def set_rates(**rates):
        settings.REST_FRAMEWORK = {
            **settings.REST_FRAMEWORK,
            "DEFAULT_THROTTLE_RATES": {"operator": None, "user": None, "anon": None, **rates},
        }

    return set_rates


def test_a_user_over_its_rate_gets_429_throttled_with_retry_after(user_api, rates):
    rates(user="3/minute")
    assert [user_api.get("/v1/me").status_code for _ in range(3)] == [200, 200, 200]
    over = user_api.get("/v1/me")
    assert over.status_code == 429
    body = over.json()
    assert body["code"] == "throttled" and body["message"]
    assert 1 <= int(over["Retry-After"]) <= 60
    assert body["retry_after"] == int(over["Retry-After"])


def test_each_user_and_each_key_has_its_own_budget(user_api, operator_api, rates):
    rates(user="2/minute", operator="2/minute")
    bob = UserFactory(username="bob")
    from ops.services import user_token_create

    bob_api = APIClient()
    bob_api.credentials(HTTP_AUTHORIZATION=f"Bearer {user_token_create(user=bob)[1]}")
    for _ in range(2):
        assert user_api.get("/v1/me").status_code == 200
    assert user_api.get("/v1/me").status_code == 429
    assert bob_api.get("/v1/me").status_code == 200
    oncall = operator_api("ingest:admin", name="oncall")
    other = operator_api("ingest:admin", name="other")
    assert [oncall.get("/v1/admin/dlq").status_code for _ in range(3)] == [200, 200, 429]
    assert other.get("/v1/admin/dlq").status_code == 200


def test_anonymous_clients_are_limited_per_ip(rates):
    rates(anon="2/minute")
    here, there = APIClient(REMOTE_ADDR="10.0.0.1"), APIClient(REMOTE_ADDR="10.0.0.2")
    assert [here.get("/v1/me").status_code for _ in range(3)] == [401, 401, 429]
    assert there.get("/v1/me").status_code == 401


def test_guessing_keys_spends_the_ip_budget_and_is_audited_boundedly(rates):
    rates(anon=f"{AUDIT_FLOOD_PER_IP + 10}/minute")
    guesser = APIClient(REMOTE_ADDR="10.0.0.9")
    answers = [
        guesser.get("/v1/admin/dlq", HTTP_X_ADMIN_KEY=f"vfk_guess{n}").status_code
        for n in range(AUDIT_FLOOD_PER_IP + 11)
    ]
    assert answers[:-1] == [401] * (AUDIT_FLOOD_PER_IP + 10)
    assert answers[-1] == 429
    rejected = AuditLog.objects.filter(action="auth.api_key_rejected")
    assert rejected.count() == AUDIT_FLOOD_PER_IP
    assert rejected.first().ip == "10.0.0.9" and rejected.first().metadata["prefix"]
    assert AuditLog.objects.filter(action="auth.api_key_rejected.suppressed").count() == 1


def test_a_rejected_bearer_token_is_audited(rates):
    APIClient().get("/v1/me", HTTP_AUTHORIZATION="Bearer vfu_wrong")
    row = AuditLog.objects.get(action="auth.token_rejected")
    assert row.result == "rejected" and row.metadata == {"prefix": "vfu_wrong"}


def test_probes_and_the_webhook_are_not_throttled(client, rates):
    rates(anon="1/minute", user="1/minute", operator="1/minute")
    for _ in range(5):
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200
        assert (
            client.post("/webhook/terra", b"{}", content_type="application/json").status_code == 401
        )


def _login(client, username, password):
    return client.post(
        "/admin/login/?next=/admin/",
        {"username": username, "password": password},
        REMOTE_ADDR="10.1.1.1",
    )


def test_admin_login_locks_a_username_and_ip_after_five_failures_only(settings):
    from django.contrib.auth import get_user_model

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast
    User = get_user_model()
    User.objects.create_superuser("ops", "ops@example.com", "right-pw")
    User.objects.create_superuser("other", "other@example.com", "other-pw")
    browser = Client()
    for _ in range(4):
        assert _login(browser, "ops", "wrong").status_code == 200  # the form again, with an error
    assert _login(browser, "ops", "wrong").status_code == 429  # the fifth failure locks the pair
    locked = _login(browser, "ops", "right-pw")
    assert locked.status_code == 429  # even the right password, for a while
    # Another username from the same IP still logs in.
    assert _login(browser, "other", "other-pw").status_code == 302
    failed = AuditLog.objects.filter(action="auth.login_failed")
    assert failed.count() >= 5
    assert failed.first().resource == "user:ops" and failed.first().ip == "10.1.1.1"


def test_me_asks_terra_at_most_once_per_user_per_interval(user_api, terra, settings):
    settings.ME_RECONCILE_SECONDS = 300
    first = user_api.get("/v1/me").json()["reconcile"]
    second = user_api.get("/v1/me").json()["reconcile"]
    assert first["skipped"] is False and second["skipped"] is True
    assert len(terra.calls("GET", "/v2/subscriptions")) == 1


def test_behind_a_trusted_proxy_the_forwarded_client_ip_has_the_budget(rates, settings):
    rates(anon="1/minute")
    settings.PROXY_HOPS = 1
    proxy = {"REMOTE_ADDR": "10.9.9.9"}
    first = APIClient(**proxy, HTTP_X_FORWARDED_FOR="spoofed, 203.0.113.5")
    second = APIClient(**proxy, HTTP_X_FORWARDED_FOR="203.0.113.6")
    assert [first.get("/v1/me").status_code for _ in range(2)] == [401, 429]
    assert second.get("/v1/me").status_code == 401  # another client behind the same proxy
