"""Work done for a user's lab uploads before instances and runs carried a subject (created with
none): the wipe finds it by the upload — the upload's lab-report instance and any graph run whose
input names the upload — terminates what is live and deletes it with everything hanging from it."""

from datetime import UTC, datetime

import pytest

from graphs import services as graph_services
from graphs.models import GraphRun, GraphToken
from ingest.actions import do_user_wipe
from labs.models import LabUpload
from labs.services import LAB_WORKFLOW, lab_instance_id
from tests.graphs.helpers import doc, node
from tests.graphs.test_child_graphs import publish_as
from workflows import services
from workflows.models import WorkflowInstance, WorkflowStep
from workflows.testing import WorkflowHarness

pytestmark = pytest.mark.django_db


def an_upload(user) -> LabUpload:
    return LabUpload.objects.create(
        user=user, storage_key=f"k/{user.pk}", content_type="application/pdf", size=1, sha256="0"
    )


def test_work_for_an_upload_created_without_a_subject_is_wiped_with_the_user(alice, bob, terra):
    publish_as(
        doc(
            [node("ack", "human", action={"event_type": "ok"}, output_mapping={"/ack": ""})],
            [],
            name="gate",
            input_schema={"type": "object"},
        ),
        "gate",
    )
    with WorkflowHarness(start=datetime(2026, 3, 1, tzinfo=UTC)) as harness:
        alices, bobs = an_upload(alice), an_upload(bob)
        for row in (alices, bobs):  # as uploads were created before the subject existed
            services.instance_create(
                workflow_name=LAB_WORKFLOW,
                instance_id=lab_instance_id(row.pk),
                params={"upload_id": str(row.pk)},
            )
            graph_services.run_create(binding_name="gate", run_input={"upload_id": str(row.pk)})
        harness.run_until_idle()
        assert not WorkflowInstance.objects.exclude(subject=None).exists()
        run_pk = GraphRun.objects.get(context__input__upload_id=str(alices.pk)).pk

        counts = do_user_wipe(user=alice, actor="user:charlie")

    assert counts["workflow_instances_of_uploads"] == 2
    assert counts["stopped_work_of_uploads"] == 2  # both were waiting
    assert not WorkflowInstance.objects.filter(instance_id=lab_instance_id(alices.pk)).exists()
    assert not GraphRun.objects.filter(pk=run_pk).exists()
    assert not GraphToken.objects.filter(run_id=run_pk).exists()
    assert WorkflowInstance.objects.filter(instance_id=lab_instance_id(bobs.pk)).exists()
    assert GraphRun.objects.filter(context__input__upload_id=str(bobs.pk)).exists()
    assert WorkflowStep.objects.filter(instance__instance_id=lab_instance_id(bobs.pk)).exists()
