"""get_workflow(name).create() is safe to retry: a key per call, generated unless given."""

from datetime import timedelta

import pytest

from ops.models import IdempotencyKey
from workflows import get_workflow
from workflows.errors import IdempotencyConflict, InstanceIdAlreadyExists
from workflows.models import WorkflowInstance

pytestmark = pytest.mark.django_db


def test_a_retry_with_the_same_key_returns_the_first_instance():
    first = get_workflow("noop3").create(params={"n": 1}, idempotency_key="order-7")
    again = get_workflow("noop3").create(params={"n": 1}, idempotency_key="order-7")
    assert again.id == first.id
    assert WorkflowInstance.objects.count() == 1


def test_params_equal_as_canonical_json_are_the_same_call():
    first = get_workflow("noop3").create(params={"n": 1, "r": 0.5}, idempotency_key="order-8")
    again = get_workflow("noop3").create(params={"r": 0.50, "n": 1.0}, idempotency_key="order-8")
    assert again.id == first.id
    assert WorkflowInstance.objects.count() == 1


def test_the_same_key_with_other_params_is_a_conflict():
    get_workflow("noop3").create(params={"n": 1}, idempotency_key="order-7")
    with pytest.raises(IdempotencyConflict):
        get_workflow("noop3").create(params={"n": 2}, idempotency_key="order-7")
    assert WorkflowInstance.objects.count() == 1


def test_without_a_key_every_call_creates_and_leaves_a_key_behind():
    a = get_workflow("noop3").create()
    b = get_workflow("noop3").create()
    assert a.id != b.id
    assert IdempotencyKey.objects.filter(principal="python").count() == 2


def test_an_expired_key_is_treated_as_new():
    first = get_workflow("noop3").create(idempotency_key="k")
    IdempotencyKey.objects.update(
        expires_at=IdempotencyKey.objects.get().created_at - timedelta(seconds=1)
    )
    second = get_workflow("noop3").create(idempotency_key="k")
    assert second.id != first.id


def test_a_refused_create_keeps_no_key_so_a_corrected_retry_works():
    get_workflow("noop3").create(id="taken")
    with pytest.raises(InstanceIdAlreadyExists):
        get_workflow("noop3").create(id="taken", idempotency_key="retry-me")
    assert not IdempotencyKey.objects.filter(key="retry-me").exists()
