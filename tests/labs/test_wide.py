"""The biomarkers_wide view (real SQL on SQLite and PostgreSQL), GET /v1/biomarkers/wide, and the
labs tables' place in /v1/sync."""

from datetime import date, timedelta

from django.db import connection
from django.utils import timezone

from ingest.registry import user_tables
from labs.aliases import WIDE_CODES
from labs.biomarkers import Measurement, biomarker_upsert
from labs.models import Biomarker, BiomarkerWide, LabUpload

D1, D2 = date(2026, 6, 29), date(2026, 7, 1)


def put(user, code: str, value, day: date, source: str = "terra_lab") -> None:
    biomarker_upsert(
        user_id=user.pk,
        source=source,
        measurement=Measurement(raw_code=code, value=value, measured_on=day),
    )


def test_view_has_one_column_per_canonical_code(db):
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM biomarkers_wide WHERE 1 = 0")
        columns = [c[0] for c in cursor.description]

    # A new canonical code needs a migration that recreates the view: this fails until it has one.
    assert columns == ["id", "user_id", "date", "updated_at", *WIDE_CODES]


def test_view_pivots_canonical_codes_per_user_and_day(alice, bob):
    put(alice, "glucose_fasting", 91.0, D1)
    put(alice, "ldl_c", 130.0, D1)
    put(alice, "hemoglobin", 14.2, D2)
    put(alice, "weight_kg", 72.4, D2, source="garmin_body")
    put(alice, "hepatitis_b_surface_antigen", None, D2)  # unmapped: long table only
    put(alice, "some_rare_marker", 3.0, date(2026, 7, 5))  # a day of unmapped codes only
    put(bob, "glucose", 200.0, D1)

    rows = {r.date: r for r in BiomarkerWide.objects.filter(user=alice)}

    assert set(rows) == {D1, D2}
    assert (rows[D1].glucose, rows[D1].ldl, rows[D1].hemoglobin) == (91.0, 130.0, None)
    assert (rows[D2].hemoglobin, rows[D2].weight_kg, rows[D2].glucose) == (14.2, 72.4, None)
    assert rows[D1].id == alice.pk * 100_000_000 + 20260629  # stable: same row, same id
    canonical = Biomarker.objects.filter(user=alice, measured_on=D2, code__in=WIDE_CODES)
    newest = canonical.latest("updated_at")  # the unmapped row written later does not count
    assert rows[D2].updated_at == newest.updated_at
    assert BiomarkerWide.objects.get(user=bob).glucose == 200.0


def test_wide_endpoint_serves_only_the_callers_rows_newest_first(user_api, alice, bob):
    put(alice, "glucose", 91.0, D1)
    put(alice, "hdl", 55.0, D2)
    put(bob, "glucose", 200.0, D2)

    response = user_api.get("/v1/biomarkers/wide")

    assert response.status_code == 200
    results = response.json()["days"]
    assert [r["date"] for r in results] == ["2026-07-01", "2026-06-29"]
    assert results[0]["hdl"] == 55.0 and results[0]["glucose"] is None
    assert results[1]["glucose"] == 91.0
    assert "user" not in results[0] and "user_id" not in results[0]
    assert set(WIDE_CODES) <= set(results[0])


def test_wide_endpoint_filters_by_date_range(user_api, alice):
    for offset in range(5):
        put(alice, "glucose", 90.0 + offset, D1 + timedelta(days=offset))

    response = user_api.get(
        "/v1/biomarkers/wide", {"date_from": "2026-06-30", "date_to": "2026-07-02"}
    )

    assert [r["date"] for r in response.json()["days"]] == [
        "2026-07-02",
        "2026-07-01",
        "2026-06-30",
    ]


def test_wide_endpoint_needs_a_user(api):
    assert api.get("/v1/biomarkers/wide").status_code == 401


def test_labs_tables_are_registered_for_sync_and_wipe():
    tables = {t.key: t for t in user_tables()}

    assert tables["biomarkers"].model is Biomarker
    assert tables["lab_uploads"].model is LabUpload
    assert tables["biomarkers_wide"].model is BiomarkerWide
    assert tables["biomarkers_wide"].sync and not tables["biomarkers_wide"].wipe
    row = LabUpload(storage_key="lab-uploads/alice/x.pdf")
    assert tables["lab_uploads"].stored_files(row) == ["lab-uploads/alice/x.pdf"]
    keys = list(tables)
    assert keys.index("biomarkers") < keys.index("lab_uploads")  # children wiped first


def test_sync_returns_long_and_wide_rows_changed_since(user_api, alice, bob):
    put(alice, "glucose", 91.0, D1)
    put(bob, "glucose", 200.0, D1)
    since = timezone.now().isoformat()
    Biomarker.objects.filter(user=alice).update(
        updated_at=timezone.now() - timedelta(days=1)
    )  # older than `since`: must not come back
    put(alice, "hdl", 55.0, D2)

    response = user_api.get("/v1/sync", {"since": since})

    assert response.status_code == 200, response.json()
    tables = response.json()["tables"]
    assert [r["code"] for r in tables["biomarkers"]] == ["hdl"]
    (wide,) = tables["biomarkers_wide"]
    assert (wide["date"], wide["hdl"]) == ("2026-07-01", 55.0)
