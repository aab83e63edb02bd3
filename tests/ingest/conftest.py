"""Ingest test helpers: deliveries that run the whole spine (webhook → on-commit enqueue →
django-q2 in sync mode → consumer) inside one test transaction."""

import json

import pytest

from tests.conftest import load_fixture, sign

TERRA_USER = "40f7b0e1-89e2-43ac-a5b8-1e29c8d47cad"
FIXTURE_REFERENCE = "your-user-123"


@pytest.fixture
def sync_queue(monkeypatch):
    """django-q2 runs each published task inline, in this process (its own `sync` mode)."""
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)


@pytest.fixture
def post(deliver, django_capture_on_commit_callbacks, sync_queue):
    """post(payload, **deliver_kwargs) → response, with on-commit work (enqueue, consume,
    backfill requests) executed before it returns."""

    def run(payload, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return deliver(payload, **kwargs)

    return run


@pytest.fixture
def fixture_payload():
    """A Terra sample with a few fields overridden: fixture_payload("daily.json", reference="x")."""

    def make(name: str, *, reference: str | None = None, terra_user: str | None = None) -> dict:
        payload = load_fixture(name)
        for key in ("user", "new_user"):
            if isinstance(payload.get(key), dict):
                if reference is not None:
                    payload[key]["reference_id"] = reference
                if terra_user is not None:
                    payload[key]["user_id"] = terra_user
        return payload

    return make


def signed_headers(body: bytes, **kwargs) -> dict:
    return {"HTTP_TERRA_SIGNATURE": sign(body, **kwargs)}


def body_of(payload: dict) -> bytes:
    return json.dumps(payload).encode()
