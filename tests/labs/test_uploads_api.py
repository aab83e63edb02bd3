"""GET /v1/labs/uploads and /v1/labs/uploads/{id}: a user's own uploads only, newest first."""

from datetime import timedelta

from django.utils import timezone

from labs.models import LabUpload
from tests.factories import UserFactory


def make_upload(user, *, minutes_ago: int = 0, **fields) -> LabUpload:
    upload = LabUpload.objects.create(
        user=user,
        storage_key=f"lab-uploads/{user.username}/x.pdf",
        original_name="r.pdf",
        content_type="application/pdf",
        size=10,
        sha256="0" * 64,
        **fields,
    )
    LabUpload.objects.filter(pk=upload.pk).update(
        created_at=timezone.now() - timedelta(minutes=minutes_ago)
    )
    return upload


def test_list_is_the_users_own_newest_first(user_api, alice, bob):
    old = make_upload(alice, minutes_ago=10)
    new = make_upload(alice, minutes_ago=1)
    make_upload(bob)

    response = user_api.get("/v1/labs/uploads")

    assert response.status_code == 200
    ids = [row["upload_id"] for row in response.json()["uploads"]]
    assert ids == [str(new.pk), str(old.pk)]


def test_list_is_cursor_paginated(user_api, alice):
    for i in range(55):
        make_upload(alice, minutes_ago=i)

    first = user_api.get("/v1/labs/uploads").json()
    assert first["has_next_page"] is True
    second = user_api.get("/v1/labs/uploads", {"cursor": first["cursor"]}).json()

    assert len(first["uploads"]) == 50
    assert len(second["uploads"]) == 5
    assert second["cursor"] is None and second["has_next_page"] is False
    seen = {r["upload_id"] for r in first["uploads"] + second["uploads"]}
    assert len(seen) == 55


def test_detail_shows_own_upload(user_api, alice):
    upload = make_upload(alice, terra_status="submitted", terra_upload_id="upl_1")

    response = user_api.get(f"/v1/labs/uploads/{upload.pk}")

    assert response.status_code == 200
    assert response.json()["terra_status"] == "submitted"
    assert response.json()["terra_upload_id"] == "upl_1"


def test_another_users_upload_is_not_found(user_api, alice):
    theirs = make_upload(UserFactory(username="mallory"))

    response = user_api.get(f"/v1/labs/uploads/{theirs.pk}")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_uploads_need_a_user_token(api):
    assert api.get("/v1/labs/uploads").status_code == 401
