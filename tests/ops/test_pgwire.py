"""The hot statements through psycopg's documented prepared statements (ops/pgwire.execute): prepared once per
connection and parameter types, the same answers and errors as a psycopg cursor, the caller's
transaction respected, and the server's prepared statements kept bounded."""

from datetime import UTC, datetime

import psycopg
import pytest
from django.db import connection, transaction

from ops import pgwire

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]


def _server_statements(prefix: str = "_pg3") -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements WHERE name LIKE %s", [f"{prefix}%"])
        return [name for (name,) in cursor.fetchall()]


def test_placeholders_are_psycopgs_and_a_literal_percent_is_doubled():
    assert pgwire.execute("SELECT %s, %s::int %% 2, '100%%'", [1, 7]) == (1, 1, "100%")
    for unsupported in ("SELECT %d", "SELECT 7 % 2"):
        with pytest.raises(psycopg.ProgrammingError):
            pgwire.execute(unsupported, [])


def test_a_statement_answers_its_first_row_with_the_cursors_types():
    at = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)
    row = pgwire.execute(
        "SELECT %s::bigint + 1, %s::text, %s::timestamptz, %s::jsonb, %s::int IS NULL",
        [41, "x", at, '{"a": [1]}', None],
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::jsonb", ['{"a": [1]}'])
        as_django_loads_json = cursor.fetchone()[0]
    assert row == (42, "x", at, as_django_loads_json, True)
    assert pgwire.execute("SELECT 1 WHERE false", []) is None


def test_a_null_parameter_and_a_value_in_its_place_both_run():
    sql = "SELECT coalesce(%s::int, -1)"
    assert pgwire.execute(sql, [None]) == (-1,)
    assert pgwire.execute(sql, [7]) == (7,)
    assert pgwire.execute(sql, [None]) == (-1,)
    assert len(_server_statements()) == 2  # one per tuple of parameter types, each prepared once


def test_errors_are_psycopgs_own_and_the_connection_stays_usable():
    with pytest.raises(psycopg.errors.DivisionByZero):
        pgwire.execute("SELECT 1 / %s", [0])
    with pytest.raises(psycopg.ProgrammingError):
        pgwire.execute("SELECT %s", [])
    assert pgwire.execute("SELECT 1 / %s", [1]) == (1,)


def test_a_statement_the_server_forgot_is_prepared_again():
    assert pgwire.execute("SELECT %s::int * 2", [2]) == (4,)
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    assert pgwire.execute("SELECT %s::int * 2", [3]) == (6,)


def test_inside_the_callers_transaction_a_statement_rolls_back_with_it():
    pgwire.execute("CREATE TABLE pgwire_probe (n int)", [])
    try:
        with pytest.raises(RuntimeError), transaction.atomic():
            pgwire.execute("INSERT INTO pgwire_probe VALUES (%s) RETURNING n", [1])
            raise RuntimeError("the caller's transaction fails")
        pgwire.execute("INSERT INTO pgwire_probe VALUES (%s) RETURNING n", [2])
        assert pgwire.execute("SELECT array_agg(n) FROM pgwire_probe", []) == ([2],)
    finally:
        pgwire.execute("DROP TABLE pgwire_probe", [])


def test_texts_past_the_bound_are_deallocated_on_the_server():
    for n in range(pgwire._KEEP_AT_MOST + 30):
        assert pgwire.execute(f"SELECT {n} + %s::int", [1]) == (n + 1,)
    assert len(_server_statements()) == pgwire._KEEP_AT_MOST
    assert pgwire.execute("SELECT 0 + %s::int", [5]) == (5,)  # forgotten, prepared again


def test_a_new_connection_prepares_afresh():
    assert pgwire.execute("SELECT %s::int", [1]) == (1,)
    connection.close()
    assert pgwire.execute("SELECT %s::int", [2]) == (2,)
    assert len(_server_statements()) == 1


def test_a_lost_backend_raises_an_operational_error():
    pgwire.execute("SELECT %s::int", [1])
    with pytest.raises(psycopg.OperationalError):
        pgwire.execute("SELECT pg_terminate_backend(pg_backend_pid()) AND %s", [True])
    connection.close()
    assert pgwire.execute("SELECT %s::int", [3]) == (3,)
