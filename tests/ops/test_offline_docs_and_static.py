"""/api/docs/ and the admin work with no internet: Swagger UI's assets come from
drf-spectacular-sidecar and every static file is served by the app (WhiteNoise), not a CDN."""

import re

import pytest


@pytest.mark.django_db
def test_api_docs_load_every_asset_from_this_server(client):
    # Seen: /api/docs/ pulled Swagger UI from a CDN and rendered blank offline.
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css|png))"', html)
    assert assets and not [a for a in assets if not a.startswith("/static/")], assets
    assert "cdn.jsdelivr" not in html and "unpkg.com" not in html
    for asset in assets:
        response = client.get(asset)
        assert response.status_code == 200, asset


@pytest.mark.django_db
def test_admin_static_files_are_served_by_the_app(client):
    # Seen: under gunicorn (DEBUG off) the admin had no CSS unless run with --insecure.
    response = client.get("/static/admin/css/base.css")
    assert response.status_code == 200
    assert b"".join(response.streaming_content).startswith(b"/*")
