"""SQL of the `biomarkers_wide` view: one row per (user, measured_on) and one column per canonical
code, by conditional aggregation over the long `biomarkers` table. Portable SQL (SQLite and
PostgreSQL); migrations call this with their own frozen code list, so change its shape only
together with a migration that recreates the view."""

import re

_IDENT = re.compile(r"[a-z_][a-z0-9_]*\Z")


def wide_view_sql(codes: tuple[str, ...] | list[str]) -> str:
    for code in codes:
        # Codes become column names and SQL literals: only plain identifiers are allowed.
        if not _IDENT.match(code):
            raise ValueError(f"canonical code {code!r} is not a plain identifier")
    columns = ",\n  ".join(
        f"MAX(CASE WHEN b.code = '{code}' THEN b.value END) AS \"{code}\"" for code in codes
    )
    listed = ", ".join(f"'{code}'" for code in codes)
    # id: stable and unique per (user, day) without a sequence: user_id * 10^8 + YYYYMMDD.
    # CAST(date AS TEXT) is 'YYYY-MM-DD' on SQLite (stored text) and PostgreSQL (ISO DateStyle).
    return f"""CREATE VIEW biomarkers_wide AS
SELECT
  CAST(b.user_id AS BIGINT) * 100000000
    + CAST(REPLACE(CAST(b.measured_on AS TEXT), '-', '') AS BIGINT) AS id,
  b.user_id AS user_id,
  b.measured_on AS "date",
  MAX(b.updated_at) AS updated_at,
  {columns}
FROM biomarkers b
WHERE b.code IN ({listed})
GROUP BY b.user_id, b.measured_on"""


DROP_VIEW_SQL = "DROP VIEW IF EXISTS biomarkers_wide"
