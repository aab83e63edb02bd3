"""Terra biomarker keys → canonical codes, and the canonical codes the wide view has columns for.

A Python module rather than a database table on purpose: the wide view's columns are fixed by a
migration, so the canonical set must change through code review and a migration anyway; an
editable table would drift from the view. Lookups are a dict hit, no query per result.

Adding a canonical code: add it to CANONICAL_CODES (and its aliases), then add a migration that
recreates `biomarkers_wide` with labs.wide.wide_view_sql — tests/labs/test_wide.py fails until
the view and this module agree."""

import re

# Canonical code → human name. Order is the wide view's column order.
CANONICAL_CODES: dict[str, str] = {
    # metabolic
    "glucose": "Glucose",
    "hba1c": "Hemoglobin A1c",
    "insulin": "Insulin",
    # lipids
    "total_cholesterol": "Total cholesterol",
    "ldl": "LDL cholesterol",
    "hdl": "HDL cholesterol",
    "triglycerides": "Triglycerides",
    "non_hdl": "Non-HDL cholesterol",
    "apob": "Apolipoprotein B",
    "lpa": "Lipoprotein(a)",
    # blood count
    "hemoglobin": "Hemoglobin",
    "hematocrit": "Hematocrit",
    "rbc": "Red blood cells",
    "wbc": "White blood cells",
    "platelets": "Platelets",
    "mcv": "Mean corpuscular volume",
    # iron and vitamins
    "ferritin": "Ferritin",
    "iron": "Iron",
    "transferrin_saturation": "Transferrin saturation",
    "vitamin_d": "Vitamin D (25-OH)",
    "vitamin_b12": "Vitamin B12",
    "folate": "Folate",
    # thyroid
    "tsh": "Thyroid stimulating hormone",
    "free_t4": "Free T4",
    "free_t3": "Free T3",
    # inflammation
    "crp": "C-reactive protein",
    "hs_crp": "High-sensitivity C-reactive protein",
    "homocysteine": "Homocysteine",
    # liver
    "alt": "Alanine aminotransferase",
    "ast": "Aspartate aminotransferase",
    "ggt": "Gamma-glutamyl transferase",
    "alp": "Alkaline phosphatase",
    "bilirubin": "Total bilirubin",
    "albumin": "Albumin",
    # kidney and electrolytes
    "creatinine": "Creatinine",
    "egfr": "eGFR",
    "bun": "Blood urea nitrogen",
    "uric_acid": "Uric acid",
    "sodium": "Sodium",
    "potassium": "Potassium",
    "calcium": "Calcium",
    "magnesium": "Magnesium",
    # hormones
    "testosterone": "Testosterone",
    "estradiol": "Estradiol",
    "cortisol": "Cortisol",
    "psa": "Prostate specific antigen",
    # body (written by the body normalizer, same long table)
    "systolic_bp": "Systolic blood pressure",
    "diastolic_bp": "Diastolic blood pressure",
    "weight_kg": "Weight",
    "body_fat_percent": "Body fat",
    "resting_heart_rate": "Resting heart rate",
}

# Other spellings Terra (or a lab) uses → canonical code. Keys are normalized by `normalize_key`.
ALIASES: dict[str, str] = {
    "glucose_fasting": "glucose",
    "fasting_glucose": "glucose",
    "blood_glucose": "glucose",
    "hemoglobin_a1c": "hba1c",
    "haemoglobin_a1c": "hba1c",
    "glycated_hemoglobin": "hba1c",
    "a1c": "hba1c",
    "cholesterol": "total_cholesterol",
    "cholesterol_total": "total_cholesterol",
    "ldl_cholesterol": "ldl",
    "ldl_c": "ldl",
    "cholesterol_ldl": "ldl",
    "hdl_cholesterol": "hdl",
    "hdl_c": "hdl",
    "cholesterol_hdl": "hdl",
    "non_hdl_cholesterol": "non_hdl",
    "apolipoprotein_b": "apob",
    "apo_b": "apob",
    "lipoprotein_a": "lpa",
    "lp_a": "lpa",
    "haemoglobin": "hemoglobin",
    "hgb": "hemoglobin",
    "hb": "hemoglobin",
    "haematocrit": "hematocrit",
    "hct": "hematocrit",
    "red_blood_cells": "rbc",
    "red_blood_cell_count": "rbc",
    "erythrocytes": "rbc",
    "white_blood_cells": "wbc",
    "white_blood_cell_count": "wbc",
    "leukocytes": "wbc",
    "platelet_count": "platelets",
    "plt": "platelets",
    "mean_corpuscular_volume": "mcv",
    "serum_iron": "iron",
    "vitamin_d_25_hydroxy": "vitamin_d",
    "25_hydroxyvitamin_d": "vitamin_d",
    "25_oh_vitamin_d": "vitamin_d",
    "vitamin_d3": "vitamin_d",
    "cobalamin": "vitamin_b12",
    "b12": "vitamin_b12",
    "folic_acid": "folate",
    "thyroid_stimulating_hormone": "tsh",
    "thyrotropin": "tsh",
    "t4_free": "free_t4",
    "ft4": "free_t4",
    "free_thyroxine": "free_t4",
    "t3_free": "free_t3",
    "ft3": "free_t3",
    "free_triiodothyronine": "free_t3",
    "c_reactive_protein": "crp",
    "hscrp": "hs_crp",
    "high_sensitivity_c_reactive_protein": "hs_crp",
    "alanine_aminotransferase": "alt",
    "sgpt": "alt",
    "aspartate_aminotransferase": "ast",
    "sgot": "ast",
    "gamma_glutamyl_transferase": "ggt",
    "gamma_gt": "ggt",
    "alkaline_phosphatase": "alp",
    "total_bilirubin": "bilirubin",
    "bilirubin_total": "bilirubin",
    "estimated_glomerular_filtration_rate": "egfr",
    "blood_urea_nitrogen": "bun",
    "urea_nitrogen": "bun",
    "testosterone_total": "testosterone",
    "total_testosterone": "testosterone",
    "oestradiol": "estradiol",
    "prostate_specific_antigen": "psa",
    "psa_total": "psa",
    "systolic_blood_pressure": "systolic_bp",
    "diastolic_blood_pressure": "diastolic_bp",
    "weight": "weight_kg",
    "body_weight": "weight_kg",
    "bodyfat_percentage": "body_fat_percent",
    "body_fat_percentage": "body_fat_percent",
    "resting_hr_bpm": "resting_heart_rate",
}

WIDE_CODES: tuple[str, ...] = tuple(CANONICAL_CODES)


def normalize_key(raw: str) -> str:
    """'LDL-C', 'ldl c', 'ldl_c' → 'ldl_c': lower case, runs of other characters → one '_'."""
    return re.sub(r"[^a-z0-9]+", "_", raw.strip().lower()).strip("_")


def canonical_code(raw: str) -> str:
    """The canonical code for a Terra key; unmapped keys come back normalized, not dropped."""
    key = normalize_key(raw)
    if key in CANONICAL_CODES:
        return key
    return ALIASES.get(key, key)
