"""What graph runs store about a user, registered with ops.userdata for the wipe and the export:
the runs whose subject they are (their context: the values a run read, e.g. out-of-range
biomarkers), their tokens, events (the context's history) and answers. Their engine instances
are the workflows app's rows, stopped and deleted through its registration (workflows.userdata);
graph rows go before them."""

from django.db.models import Q

from graphs.models import GraphAnswer, GraphRun, GraphRunEvent, GraphToken
from ops.userdata import Subject, UserData, user_data_register
from workflows.userdata import FIRST_ROWS


def runs_of(subject: Subject):
    # The run's subject is its instance's; either one names the user.
    return GraphRun.objects.filter(Q(subject_id=subject.pk) | Q(instance__subject_id=subject.pk))


def _of_runs(model):
    return lambda subject: model.objects.filter(run__in=runs_of(subject).values("pk"))


def register() -> None:
    """Called by GraphsConfig.ready(), after the workflows app registered its sources."""
    for source in (
        UserData("graph_answers", GraphAnswer, _of_runs(GraphAnswer)),
        UserData("graph_run_events", GraphRunEvent, _of_runs(GraphRunEvent)),
        UserData("graph_tokens", GraphToken, _of_runs(GraphToken)),
        UserData("graph_runs", GraphRun, runs_of),
    ):
        user_data_register(source, before=FIRST_ROWS)
