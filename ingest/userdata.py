"""What ingest stores about a user, registered with ops.userdata for the wipe and the export: the
typed tables (through ingest.registry's user tables), traces, raw events with their exact
bodies, import jobs and Terra connections; and the identifiers that find them (every Terra user
id the user ever had)."""

from django.db.models import Q

from ingest.bodies import body_chunks
from ingest.models import ImportJob, RawEvent, TerraConnection, TraceEvent
from ingest.selectors import user_raw_events, user_terra_user_ids
from ops.userdata import Subject, UserData, identifiers_register, user_data_register

TERRA_USER_ID = "terra_user_id"
# What Terra echoes back as a delivery's reference_id besides the username: labs registers its
# uploads' ids under this kind (a lab report's reference_id is Terra's upload id).
TERRA_REFERENCE = "terra_reference"


def _identifiers(user) -> dict:
    return {TERRA_USER_ID: user_terra_user_ids(user=user)}


def raw_events_of(subject: Subject):
    return user_raw_events(
        user=subject.user,
        terra_user_ids=subject.ids(TERRA_USER_ID),
        references=sorted(subject.ids(TERRA_REFERENCE)),
    )


def _traces_of(subject: Subject):
    # Evaluated before the raw events go (the wipe deletes traces first).
    return TraceEvent.objects.filter(
        Q(user=subject.user) | Q(raw_event_id__in=raw_events_of(subject).values("id"))
    )


def _body(row) -> list:
    # The exact bytes Terra sent, streamed from the database in pieces (ingest.bodies).
    return [(f"{row.pk}.json", lambda: body_chunks(row.pk))]


def register() -> None:
    """Called by ingest's AppConfig.ready(), after its typed tables (ingest.registry)."""
    identifiers_register(_identifiers)
    user_data_register(UserData("trace_events", TraceEvent, _traces_of))
    user_data_register(
        UserData("raw_events", RawEvent, raw_events_of, attachments=_body, omit=("body",))
    )
    user_data_register(
        UserData("import_jobs", ImportJob, lambda s: ImportJob.objects.filter(user=s.user))
    )
    user_data_register(
        UserData(
            "terra_connections",
            TerraConnection,
            lambda s: TerraConnection.objects.filter(user=s.user),
        )
    )
