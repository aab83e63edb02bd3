"""The user's export: GET /v1/me/export (their bearer token) and `manage.py export_user` give one
zip of everything stored about them, in the documented layout (manifest, user.json, a JSON-lines
file per table, the files: exact delivery bodies and lab reports), nothing of anyone else's."""

import hashlib
import io
import json
import zipfile
from datetime import date

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.management import call_command

from ingest.models import RawEvent
from labs.models import Biomarker, LabUpload
from ops.models import AuditLog
from tests.ingest.conftest import TERRA_USER

pytestmark = pytest.mark.django_db

BOB_TERRA = "5b0b0b0b-0000-4000-8000-00000000b0b0"
REPORT = b"%PDF-1.7\n" + bytes(range(256)) * 40  # not text: the copy must be byte for byte


def deliveries(post, fixture_payload, *, reference, terra_user):
    for name in ("auth.json", "daily.json", "sleep.json", "activity.json", "body.json"):
        payload = fixture_payload(name, reference=reference, terra_user=terra_user)
        assert post(payload).status_code == 200


def lab_upload(user, *, marker_value: float) -> LabUpload:
    key = default_storage.save(f"lab-uploads/{user.username}/r.pdf", ContentFile(REPORT))
    upload = LabUpload.objects.create(
        user=user,
        storage_key=key,
        content_type="application/pdf",
        size=len(REPORT),
        sha256=hashlib.sha256(REPORT).hexdigest(),
        terra_upload_id=f"upl_{user.username}",
        terra_status="parsed",
    )
    Biomarker.objects.create(
        user=user,
        source="terra_lab",
        code="ldl",
        value=marker_value,
        measured_on=date(2026, 7, 1),
        lab_upload=upload,
    )
    return upload


@pytest.fixture
def two_users(alice, bob, post, fixture_payload):
    deliveries(post, fixture_payload, reference="alice", terra_user=TERRA_USER)
    deliveries(post, fixture_payload, reference="bob", terra_user=BOB_TERRA)
    return lab_upload(alice, marker_value=123.25), lab_upload(bob, marker_value=987.75)


def read_archive(content: bytes) -> tuple[zipfile.ZipFile, dict, dict[str, list[dict]]]:
    archive = zipfile.ZipFile(io.BytesIO(content))
    assert archive.testzip() is None
    manifest = json.loads(archive.read("manifest.json"))
    tables = {
        key: [json.loads(line) for line in archive.read(entry["file"]).splitlines()]
        for key, entry in manifest["tables"].items()
    }
    return archive, manifest, tables


def test_my_export_holds_everything_of_mine_in_the_documented_layout(user_api, two_users, alice):
    upload, _ = two_users
    response = user_api.get("/v1/me/export")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert "attachment" in response["Content-Disposition"]
    archive, manifest, tables = read_archive(b"".join(response.streaming_content))
    assert (manifest["format"], manifest["version"]) == ("vitalflow-export", 1)
    assert "README.txt" in archive.namelist()
    assert json.loads(archive.read("user.json"))["username"] == "alice"
    for key in (
        "daily_summary",
        "sleep_sessions",
        "activities",
        "biomarkers",
        "lab_uploads",
        "raw_events",
        "trace_events",
        "terra_connections",
    ):
        assert tables[key], key
        assert manifest["tables"][key]["rows"] == len(tables[key])
        assert {row.get("user_id", alice.pk) for row in tables[key]} <= {alice.pk, None}
    # secrets and replay caches are not the user's data to take
    assert "user_tokens" not in tables and "idempotency_keys" not in tables
    # nothing of bob's
    assert [b["value"] for b in tables["biomarkers"] if b["source"] == "terra_lab"] == [123.25]
    assert {c["terra_user_id"] for c in tables["terra_connections"]} == {TERRA_USER}
    # every delivery with its exact bytes, the lab report byte for byte
    mine = RawEvent.objects.filter(user=alice)
    assert {r["id"] for r in tables["raw_events"]} == set(mine.values_list("id", flat=True))
    for row in mine:
        body = archive.read(f"files/raw_events/{row.pk}.json")
        assert hashlib.sha256(body).hexdigest() == row.dedup_key
    assert archive.read(f"files/lab_uploads/{upload.storage_key.rsplit('/', 1)[-1]}") == REPORT
    assert "body" not in tables["raw_events"][0]


def test_my_export_is_audited_without_values(user_api, two_users, alice):
    user_api.get("/v1/me/export")
    row = AuditLog.objects.get(action="export.read")
    assert (row.actor, row.subject_id, row.count) == ("user:alice", alice.pk, 1)
    assert row.request_id and row.metadata == {}


def test_an_operator_key_cannot_export_a_user(operator_api, two_users):
    response = operator_api("*").get("/v1/me/export")
    assert response.status_code == 403
    assert AuditLog.objects.filter(action="auth.denied").count() == 1


def test_exports_are_limited_per_user_per_hour(user_api, alice):
    for _ in range(6):
        assert user_api.get("/v1/me/export").status_code == 200
    refused = user_api.get("/v1/me/export")
    assert refused.status_code == 429 and refused.json()["code"] == "throttled"
    assert int(refused["Retry-After"]) > 0


def test_export_user_command_writes_the_archive_and_is_audited(two_users, alice, tmp_path):
    target = tmp_path / "alice.zip"
    out = io.StringIO()
    call_command("export_user", "alice", "--out", str(target), stdout=out)
    _, manifest, tables = read_archive(target.read_bytes())
    assert manifest["tables"]["raw_events"]["files"] == RawEvent.objects.filter(user=alice).count()
    assert 123.25 in [b["value"] for b in tables["biomarkers"]]
    assert f"wrote {target}" in out.getvalue()
    assert not list(tmp_path.glob("*.partial"))
    row = AuditLog.objects.get(action="export.read")
    assert (row.actor, row.subject_id) == ("command:export_user", alice.pk)


def test_a_missing_stored_file_is_named_in_the_manifest_not_a_failure(two_users, tmp_path):
    upload, _ = two_users
    default_storage.delete(upload.storage_key)
    call_command("export_user", "alice", "--out", str(tmp_path / "a.zip"), stdout=io.StringIO())
    archive, manifest, _ = read_archive((tmp_path / "a.zip").read_bytes())
    name = f"files/lab_uploads/{upload.storage_key.rsplit('/', 1)[-1]}"
    assert manifest["missing_files"] == [name] and name not in archive.namelist()


def test_rows_another_app_registers_are_exported_and_wiped_alike(
    user_api, alice, bob, registries, django_capture_on_commit_callbacks
):
    """The hook workflows and graphs fill in: a source registered in ops.userdata is part of the
    user's export and of their wipe, with no change to either."""
    from ingest.actions import do_user_wipe
    from ingest.models import ImportJob
    from ops.userdata import UserData, user_data_register

    def jobs_of(subject):
        return ImportJob.objects.filter(user=subject.user, days=7)

    user_data_register(UserData("weekly_jobs", ImportJob, jobs_of), before="import_jobs")
    for user in (alice, bob):
        ImportJob.objects.create(
            user=user, days=7, start_date=date(2026, 1, 1), end_date=date(2026, 1, 8)
        )
    response = user_api.get("/v1/me/export")
    _, manifest, tables = read_archive(b"".join(response.streaming_content))
    assert [row["user_id"] for row in tables["weekly_jobs"]] == [alice.pk]
    with django_capture_on_commit_callbacks(execute=True):
        counts = do_user_wipe(user=alice, actor="test")
    assert counts["weekly_jobs"] == 1 and counts["import_jobs"] == 0
    assert ImportJob.objects.filter(user=bob).count() == 1
