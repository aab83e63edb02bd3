"""SQL of the sync client's local mirror (manage.py sync_pull): a SQLite file through the standard
library, one table per server table keyed on id, columns added as they appear, plus a key/value
table of what the last complete pull reached."""

import json
import re
import sqlite3
from contextlib import contextmanager

from django.core.management.base import CommandError

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
STATE_TABLE = "_sync_state"


def _ident(name: str) -> str:
    if not _IDENT.match(name):
        raise CommandError(f"refusing unsafe table/column name from the server: {name!r}")
    return f'"{name}"'


def _value(v):
    return json.dumps(v) if isinstance(v, dict | list) else v


class Mirror:
    """The local file: one table per server table keyed on id, plus a key/value state table."""

    def __init__(self, path: str):
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute(f"CREATE TABLE IF NOT EXISTS {STATE_TABLE} (key TEXT PRIMARY KEY, value)")
        self.columns: dict[str, set[str]] = {}

    @contextmanager
    def pull(self):
        """One pull is one local transaction: an interrupted pull leaves the file as it was."""
        self.db.execute("BEGIN")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def get_state(self, key: str) -> str | None:
        row = self.db.execute(f"SELECT value FROM {STATE_TABLE} WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_state(self, key: str, value: str) -> None:
        self.db.execute(
            f"INSERT INTO {STATE_TABLE} (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def _ensure(self, table: str, names) -> None:
        if table not in self.columns:
            self.db.execute(f"CREATE TABLE IF NOT EXISTS {_ident(table)} (id PRIMARY KEY)")
            info = self.db.execute(f"PRAGMA table_info({_ident(table)})").fetchall()
            self.columns[table] = {row[1] for row in info}
        for name in names:
            if name not in self.columns[table]:
                self.db.execute(f"ALTER TABLE {_ident(table)} ADD COLUMN {_ident(name)}")
                self.columns[table].add(name)

    def upsert(self, table: str, rows: list[dict]) -> None:
        names = sorted({k for row in rows for k in row})
        self._ensure(table, names)
        cols = ", ".join(_ident(n) for n in names)
        updates = ", ".join(f"{_ident(n)} = excluded.{_ident(n)}" for n in names if n != "id")
        sql = (
            f"INSERT INTO {_ident(table)} ({cols}) VALUES ({', '.join('?' * len(names))}) "
            f"ON CONFLICT(id) DO UPDATE SET {updates}"
        )
        self.db.executemany(sql, [[_value(row.get(n)) for n in names] for row in rows])
