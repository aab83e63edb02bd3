"""The code-alias table: Terra's keys → canonical codes; unmapped keys kept as they are."""

import re

import pytest

from labs.aliases import ALIASES, CANONICAL_CODES, WIDE_CODES, canonical_code, normalize_key
from labs.biomarkers import Measurement, biomarker_upsert
from labs.models import Biomarker


@pytest.mark.parametrize(
    "raw,code",
    [
        ("glucose_fasting", "glucose"),
        ("glucose", "glucose"),
        ("hemoglobin", "hemoglobin"),
        ("haemoglobin", "hemoglobin"),
        ("ldl_cholesterol", "ldl"),
        ("ldl_c", "ldl"),
        ("LDL-C", "ldl"),
        ("HDL Cholesterol", "hdl"),
        ("thyroid_stimulating_hormone", "tsh"),
        ("prostate_specific_antigen", "psa"),
        ("hemoglobin_a1c", "hba1c"),
        ("25-hydroxyvitamin D", "vitamin_d"),
        ("hs-CRP", "hs_crp"),
        ("c_reactive_protein", "crp"),
        ("hepatitis_b_surface_antigen", "hepatitis_b_surface_antigen"),  # unmapped
        ("Some New Marker", "some_new_marker"),  # unmapped, normalized
    ],
)
def test_canonical_code(raw, code):
    assert canonical_code(raw) == code


def test_every_alias_points_at_a_canonical_code():
    assert set(ALIASES.values()) <= set(CANONICAL_CODES)
    assert all(normalize_key(alias) == alias for alias in ALIASES)
    assert not set(ALIASES) & set(CANONICAL_CODES)


def test_canonical_codes_are_plain_identifiers_usable_as_view_columns():
    assert len(WIDE_CODES) >= 30
    assert all(re.fullmatch(r"[a-z_][a-z0-9_]*", code) for code in WIDE_CODES)


def test_alias_and_canonical_spellings_merge_into_one_row(alice):
    for raw, value in (("ldl_c", 130.0), ("ldl_cholesterol", None)):
        biomarker_upsert(
            user_id=alice.pk,
            source="terra_lab",
            measurement=Measurement(raw_code=raw, value=value, measured_on="2026-07-01"),
        )

    (row,) = Biomarker.objects.filter(user=alice)
    assert (row.code, row.raw_code, row.value) == ("ldl", "ldl_cholesterol", 130.0)
