"""API authentication and the JSON error contract shared by every endpoint."""

from io import StringIO

import pytest
from django.core.management import call_command

from ops.models import ApiKey, UserToken
from ops.services import secret_hash

pytestmark = pytest.mark.django_db


def test_unknown_route_answers_json_404(api):
    response = api.get("/v1/does-not-exist")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_request_id_is_echoed_when_sent_and_minted_when_not(api):
    assert api.get("/v1/nope", HTTP_X_REQUEST_ID="abc-123")["X-Request-ID"] == "abc-123"
    minted = api.get("/v1/nope")["X-Request-ID"]
    assert len(minted) == 32


def test_hostile_request_id_is_replaced(api):
    assert (
        api.get("/v1/nope", HTTP_X_REQUEST_ID="bad id\nwith newline")["X-Request-ID"]
        != "bad id\nwith newline"
    )


def test_create_api_key_prints_the_key_once_and_stores_only_its_hash():
    out = StringIO()
    call_command(
        "create_api_key", "--name", "oncall", "--scopes", "ingest:admin,workflows:read", stdout=out
    )
    raw = out.getvalue().strip()
    key = ApiKey.objects.get(name="oncall")
    assert key.key_hash == secret_hash(raw)
    assert raw not in str(key.__dict__)
    assert key.scopes == ["ingest:admin", "workflows:read"]


def test_create_user_token_with_create_makes_the_user():
    out = StringIO()
    call_command("create_user_token", "dora", "--create", stdout=out)
    token = UserToken.objects.get(user__username="dora")
    assert token.token_hash == secret_hash(out.getvalue().strip())
