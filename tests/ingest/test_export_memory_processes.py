"""A real gunicorn worker exporting a user with a 50 MB lab upload and 50 MB of delivery bodies
keeps its memory flat: its peak RSS (VmHWM) rises by a fraction of either, never by the archive."""

import hashlib
import io
import os
import zipfile

import httpx
import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from ingest.models import RawEvent
from labs.models import LabUpload
from ops.services import user_token_create
from tests.factories import UserFactory
from tests.labs.test_upload_memory_processes import MiB, _peak_rss, _worker_pid
from tests.ops.live_server import gunicorn_server

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres_only,
    pytest.mark.slow,
]


def test_exporting_a_50_mb_upload_and_50_mb_of_bodies_keeps_the_worker_small(tmp_path):
    user = UserFactory(username="alice")
    _, token = user_token_create(user=user)
    report = b"%PDF-1.7\n" + os.urandom(50 * MiB)  # incompressible: the archive holds it all
    key = default_storage.save("lab-uploads/alice/big.pdf", ContentFile(report))
    LabUpload.objects.create(
        user=user,
        storage_key=key,
        content_type="application/pdf",
        size=len(report),
        sha256=hashlib.sha256(report).hexdigest(),
    )
    bodies = []
    for _ in range(200):
        body = b'{"type":"daily","data":[],"pad":"' + os.urandom(128 * 1024).hex().encode() + b'"}'
        bodies.append(
            RawEvent(
                event_type="daily",
                reference_id="alice",
                user=user,
                body=body,
                dedup_key=hashlib.sha256(body).hexdigest(),
                state="processed",
            )
        )
    RawEvent.objects.bulk_create(bodies)
    headers = {"Authorization": f"Bearer {token}"}
    with gunicorn_server(tmp_path, workers=1, env={"TERRA_API_KEY": ""}) as base:
        assert httpx.get(f"{base}/v1/labs/uploads", headers=headers).status_code == 200  # warm
        worker = _worker_pid()
        before = _peak_rss(worker)
        archive = io.BytesIO()
        with httpx.stream("GET", f"{base}/v1/me/export", headers=headers, timeout=120) as answer:
            assert answer.status_code == 200
            for chunk in answer.iter_bytes():
                archive.write(chunk)
        after = _peak_rss(worker)
    with zipfile.ZipFile(archive) as opened:
        assert opened.read("files/lab_uploads/big.pdf") == report
        assert len([n for n in opened.namelist() if n.startswith("files/raw_events/")]) == 200
    print(f"\nworker peak RSS: {before / MiB:.1f} MiB warm, {after / MiB:.1f} MiB after the export")
    assert after - before < 25 * MiB
