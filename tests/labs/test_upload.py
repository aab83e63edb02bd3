"""POST /v1/labs/upload: validation by content, size limits, storage, and the 202 that hands the
forward to the upload's lab-report workflow (tests/labs/test_lab_report_workflow.py)."""

import io

import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test.client import encode_multipart
from rest_framework.test import APIClient

from labs.models import LabUpload
from ops.services import user_token_create
from tests.conftest import load_fixture
from tests.factories import UserFactory
from tests.labs.helpers import (
    BOUNDARY,
    JPEG,
    MULTIPART,
    PDF,
    PNG,
    UPLOAD_URL,
    multipart_body,
    run_workflows,
    sized,
    upload,
)

MiB = 1024 * 1024
TERRA_PATH = "/v2/lab-reports"


@pytest.fixture
def terra_accepts(terra):
    terra.on("POST", TERRA_PATH, (200, load_fixture("lab_reports_upload_response.json")))
    return terra


@pytest.fixture
def small_limit(settings):
    settings.LAB_UPLOAD_MAX_BYTES = 1024
    return 1024


def stored_bytes(key: str) -> bytes:
    with default_storage.open(key, "rb") as f:
        return f.read()


def test_pdf_is_stored_recorded_and_forwarded(user_api, alice, terra_accepts):
    response = upload(user_api, PDF, name="blood work.pdf")

    assert response.status_code == 202, response.json()
    body = response.json()
    row = LabUpload.objects.get(pk=body["upload_id"])
    assert body == {"upload_id": str(row.pk), "status": "pending", "instance_id": f"lab-{row.pk}"}
    assert row.terra_status == "pending"
    assert not terra_accepts.calls("POST", TERRA_PATH)  # the answer does not wait for Terra
    run_workflows()
    row.refresh_from_db()
    assert row.terra_status == "submitted"
    assert row.storage_key == f"lab-uploads/alice/{row.pk}.pdf"
    assert stored_bytes(row.storage_key) == PDF
    assert row.user == alice
    assert row.original_name == "blood work.pdf"
    assert row.content_type == "application/pdf"
    assert row.size == len(PDF)
    assert len(row.sha256) == 64
    assert row.terra_upload_id == "upl_4a2b8c1d"
    assert row.terra_response == {"upload_id": "upl_4a2b8c1d", "current_status": "processing"}


def test_forwarded_request_has_reference_id_files_and_credentials(
    user_api, terra_accepts, settings
):
    upload(user_api, JPEG, name="scan.jpeg", mime="image/jpeg")
    run_workflows()

    (request,) = terra_accepts.calls("POST", TERRA_PATH)
    assert request.headers["dev-id"] == settings.TERRA_DEV_ID
    assert request.headers["x-api-key"]
    assert request.headers["content-type"].startswith("multipart/form-data; boundary=")
    content = request.read()
    assert b'Content-Disposition: form-data; name="reference_id"\r\n\r\nalice\r\n' in content
    assert b'Content-Disposition: form-data; name="files"; filename="' in content
    assert b'name="file";' not in content  # Terra answers 400 "No Files Provided" to `file`
    assert b"Content-Type: image/jpeg\r\n\r\n" + JPEG in content


def test_png_named_pdf_is_stored_as_png(user_api, terra_accepts):
    response = upload(user_api, PNG, name="report.pdf", mime="application/pdf")

    assert response.status_code == 202
    row = LabUpload.objects.get(pk=response.json()["upload_id"])
    assert row.storage_key.endswith(".png")
    assert row.content_type == "image/png"
    assert row.original_name == "report.pdf"


def test_pdf_declared_as_text_is_accepted_by_content(user_api, terra_accepts):
    response = upload(user_api, PDF, name="notes.txt", mime="text/plain")

    assert response.status_code == 202
    assert LabUpload.objects.get(pk=response.json()["upload_id"]).storage_key.endswith(".pdf")


def test_client_file_name_never_reaches_the_storage_path(user_api, terra_accepts, settings):
    response = upload(user_api, PDF, name="../../etc/passwd")

    assert response.status_code == 202
    row = LabUpload.objects.get(pk=response.json()["upload_id"])
    assert row.storage_key == f"lab-uploads/alice/{row.pk}.pdf"
    assert "passwd" not in row.storage_key
    assert row.original_name.endswith("passwd")  # kept only as metadata


@pytest.mark.parametrize(
    "content,name,mime",
    [
        (b"hello, not a report", "report.pdf", "application/pdf"),
        (b"GIF89a" + b"\x00" * 20, "scan.png", "image/png"),
        (b"PK\x03\x04zipzip", "report.jpg", "image/jpeg"),
    ],
)
def test_content_that_is_not_pdf_png_or_jpeg_is_refused(user_api, terra, content, name, mime):
    response = upload(user_api, content, name=name, mime=mime)

    assert response.status_code == 415
    assert response.json()["code"] == "unsupported_file_type"
    assert LabUpload.objects.count() == 0
    assert terra.calls("POST", TERRA_PATH) == []


def test_empty_file_is_refused(user_api, terra):
    response = upload(user_api, b"", name="empty.pdf")

    assert response.status_code == 400
    assert response.json()["code"] == "empty_file"
    assert LabUpload.objects.count() == 0


def test_json_body_is_not_multipart(user_api):
    response = user_api.post(UPLOAD_URL, {"file": "x"}, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "expected_multipart"


def test_unparsable_multipart_is_refused(user_api):
    response = user_api.generic(
        "POST", UPLOAD_URL, b"garbage", content_type="multipart/form-data"
    )  # no boundary

    assert response.status_code == 400
    assert response.json()["code"] == "expected_multipart"


def test_multipart_without_file_field_is_refused(user_api):
    body = multipart_body(PDF, field="document")

    response = user_api.generic("POST", UPLOAD_URL, body, content_type=MULTIPART)

    assert response.status_code == 400
    assert response.json()["code"] == "missing_file_field"


def test_oversized_text_fields_are_refused(user_api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    body = encode_multipart(BOUNDARY, {"note": "x" * 500, "file": SimpleUploadedFile("r.pdf", PDF)})

    response = user_api.generic("POST", UPLOAD_URL, body, content_type=MULTIPART)

    assert response.status_code == 413
    assert response.json()["code"] == "file_too_large"


def test_too_many_file_parts_are_refused(user_api, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 2
    parts = {f"extra{i}": SimpleUploadedFile(f"{i}.pdf", PDF) for i in range(3)}
    body = encode_multipart(BOUNDARY, {**parts, "file": SimpleUploadedFile("r.pdf", PDF)})

    response = user_api.generic("POST", UPLOAD_URL, body, content_type=MULTIPART)

    assert response.status_code == 400
    assert response.json()["code"] == "expected_multipart"


def test_upload_needs_a_user_token(api, operator_api):
    assert upload(api, PDF).status_code == 401
    assert upload(operator_api("admin"), PDF).status_code == 403


def test_exactly_the_limit_is_accepted_and_one_more_byte_refused(
    user_api, terra_accepts, small_limit
):
    at_limit = upload(user_api, sized(PDF, small_limit))
    over = upload(user_api, sized(PDF, small_limit + 1))

    assert at_limit.status_code == 202
    assert over.status_code == 413
    assert over.json()["code"] == "file_too_large"
    assert LabUpload.objects.count() == 1


def test_real_ten_mib_boundary(user_api, terra_accepts, settings):
    limit = settings.LAB_UPLOAD_MAX_BYTES
    assert limit == 10 * MiB  # the shipped default, not an override

    at_limit = upload(user_api, sized(PDF, 10 * MiB))
    over = upload(user_api, sized(PDF, 10 * MiB + 1))

    assert at_limit.status_code == 202, at_limit.json()
    row = LabUpload.objects.get(pk=at_limit.json()["upload_id"])
    assert row.size == 10 * MiB
    assert default_storage.size(row.storage_key) == 10 * MiB
    assert over.status_code == 413
    assert over.json()["code"] == "file_too_large"
    assert LabUpload.objects.count() == 1


class Untouchable(io.RawIOBase):
    """A request body that fails the test if anyone reads it."""

    def read(self, size=-1):
        raise AssertionError("the oversized body was read")

    def readinto(self, buffer):
        raise AssertionError("the oversized body was read")


def test_oversized_declared_body_is_refused_without_reading_it(user_api, terra):
    response = user_api.generic(
        "POST",
        UPLOAD_URL,
        b"",
        content_type=MULTIPART,
        **{"wsgi.input": Untouchable(), "CONTENT_LENGTH": str(200 * MiB)},
    )

    assert response.status_code == 413
    assert response.json()["code"] == "file_too_large"
    assert terra.requests == []


class Trickle(io.RawIOBase):
    """A chunked request body: read() hands out at most `step` bytes and counts what was read."""

    def __init__(self, data: bytes, step: int = 8192):
        self.data, self.pos, self.step = data, 0, step

    def read(self, size=-1):
        size = self.step if size is None or size < 0 else min(size, self.step)
        chunk = self.data[self.pos : self.pos + size]
        self.pos += len(chunk)
        return chunk


def chunked_post(client, body: bytes):
    stream = Trickle(body)
    response = client.generic(
        "POST",
        UPLOAD_URL,
        b"",
        content_type=MULTIPART,
        HTTP_TRANSFER_ENCODING="chunked",
        **{"wsgi.input": stream},
    )
    return response, stream


def test_chunked_body_within_limit_is_parsed(user_api, terra_accepts, small_limit):
    response, _ = chunked_post(user_api, multipart_body(sized(PDF, small_limit)))

    assert response.status_code == 202, response.json()
    assert LabUpload.objects.get().size == small_limit


def test_chunked_body_over_limit_is_cut_off_while_reading(user_api, terra, small_limit):
    huge = multipart_body(sized(PDF, 5 * MiB))

    response, stream = chunked_post(user_api, huge)

    assert response.status_code == 413
    assert response.json()["code"] == "file_too_large"
    assert stream.pos < 200 * 1024  # stopped near limit + multipart slack, not at 5 MiB
    assert LabUpload.objects.count() == 0


def test_unsafe_username_does_not_climb_out_of_the_user_folder(terra_accepts, db):
    user = UserFactory(username="..")
    _, raw = user_token_create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")

    response = upload(client, PDF)

    assert response.status_code == 202
    row = LabUpload.objects.get(pk=response.json()["upload_id"])
    assert row.storage_key.startswith(f"lab-uploads/user-{user.pk}/")
