"""POST /v1/workflows/_runner/tick is safe to call concurrently: real threads against a live
server on PostgreSQL, every instance run exactly once."""

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from ops.models import AuditLog
from ops.services import api_key_create
from tests.ops.test_idempotency import IS_POSTGRES, roomy_live_server  # noqa: F401 - fixture
from tests.workflows.test_http_support import TICK
from workflows import services
from workflows.models import WorkflowInstance, WorkflowStep


@pytest.mark.postgres_only
@pytest.mark.skipif(not IS_POSTGRES, reason="needs PostgreSQL: real threads on a live server")
def test_concurrent_ticks_run_every_instance_once(roomy_live_server):  # noqa: F811
    for n in range(30):
        services.instance_create(workflow_name="h5-ver", instance_id=f"t{n}")
    _, raw = api_key_create(name="ticker", scopes=[TICK])
    barrier = threading.Barrier(10)

    def tick(_):
        with httpx.Client(base_url=roomy_live_server, timeout=60) as client:
            barrier.wait()
            return client.post(
                "/v1/workflows/_runner/tick",
                json={"max_instances": 5},
                headers={"X-Admin-Key": raw},
            )

    with ThreadPoolExecutor(max_workers=10) as pool:
        responses = list(pool.map(tick, range(10)))

    assert {r.status_code for r in responses} == {200}
    assert sum(r.json()["processed"] for r in responses) == 30
    assert set(WorkflowInstance.objects.values_list("status", flat=True)) == {"complete"}
    assert WorkflowStep.objects.filter(name="which").count() == 30  # one stored step each
    assert AuditLog.objects.filter(action="workflow.runner_tick").count() == 10
