"""Work done for a user's lab uploads before instances and runs carried a subject: the lab-report
instance of each upload (`lab-<upload id>`) and graph runs whose input names one of their uploads.
Registered with ops.userdata so that a wipe stops and deletes them too (their steps, events, logs,
tasks and graph rows go with them, by cascade) and the export holds them. Work created since
carries its subject and is the workflows app's to wipe (workflows.userdata)."""

from django.db.models import Q

from labs.models import LabUpload
from labs.services import LAB_WORKFLOW, lab_instance_id
from ops.userdata import Subject, UserData, stopper_register, user_data_register
from workflows.models import WorkflowInstance
from workflows.userdata import FIRST_ROWS, instances_terminate


def earlier_work_of(subject: Subject):
    ids = [
        str(pk) for pk in LabUpload.objects.filter(user_id=subject.pk).values_list("pk", flat=True)
    ]
    if not ids:
        return WorkflowInstance.objects.none()
    return WorkflowInstance.objects.filter(subject__isnull=True).filter(
        Q(workflow_name=LAB_WORKFLOW, instance_id__in=[lab_instance_id(i) for i in ids])
        | Q(graph_run__context__input__upload_id__in=ids)
    )


def register() -> None:
    """Called by LabsConfig.ready(): before the engine's rows, while the uploads still exist."""
    user_data_register(
        UserData("workflow_instances_of_uploads", WorkflowInstance, earlier_work_of),
        before=FIRST_ROWS,
    )
    stopper_register(
        "work_of_uploads", lambda subject: instances_terminate(earlier_work_of(subject))
    )
