"""DATABASES from DATABASE_URL (PostgreSQL or SQLite), with the bounds every PostgreSQL connection
gets against a silent network and the SQLite options that let several processes share a file."""

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_int, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
# A checkout keeps its data next to manage.py; an installed wheel (no manage.py beside the
# packages in site-packages) keeps it under the working directory instead.
PROJECT_ROOT = BASE_DIR if (BASE_DIR / "manage.py").exists() else Path.cwd()


# SQLAlchemy-style spellings people paste from other tools; same Django backend.
for _scheme in ("postgresql+psycopg", "postgres+psycopg", "postgresql+psycopg2"):
    dj_database_url.register(_scheme, "django.db.backends.postgresql")


def database_from_url(url: str) -> dict:
    """DATABASE_URL through dj-database-url: postgres://user:pass@host:port/name?opt=v,
    postgresql+psycopg://…, a socket folder as host (postgres://u@%2Frun%2Fpostgresql/name or
    ?host=/run/postgresql), sqlite:///relative/file.sqlite3 or sqlite:////absolute/file."""
    try:
        parsed = dj_database_url.parse(
            url,
            # Persistent connections: django-q2 otherwise reconnects for every broker operation.
            conn_max_age=env_int("CONN_MAX_AGE", 600),
            conn_health_checks=True,
        )
    except (ValueError, dj_database_url.UnknownSchemeError) as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is not usable: {exc}") from None
    engine = parsed["ENGINE"]
    if engine == "django.db.backends.sqlite3":
        name = Path(parsed["NAME"])
        # Relative to the project (a checkout) or the working directory (an installed wheel),
        # like var/: every process of one deployment then opens the same file.
        return sqlite_database(str(name if name.is_absolute() else PROJECT_ROOT / name))
    if engine != "django.db.backends.postgresql":
        raise ImproperlyConfigured(f"DATABASE_URL engine {engine} is not supported (PostgreSQL)")
    # Bounds on a connection that goes silent (below); the URL's query may override each.
    options = parsed["OPTIONS"] = {**postgres_connection_bounds(), **parsed.get("OPTIONS", {})}
    if not parsed.get("HOST") and options.get("host"):
        parsed["HOST"] = options.pop("host")  # ?host=/run/postgresql: a socket folder
    parsed["TEST"] = {"NAME": env_str("TEST_DATABASE_NAME") or None}
    return dict(parsed)


# --- Database connection bounds (PostgreSQL) ---------------------------------------------------
# A connection that goes silent (a network partition: no FIN, no RST) fails within about 30 s
# instead of waiting out TCP's two hours. libpq's documented parameters, set on every connection:
# - connect_timeout: a database that accepts TCP but never answers fails the connect in seconds;
# - keepalives: an idle connection is probed after DB_KEEPALIVES_IDLE s, every
#   DB_KEEPALIVES_INTERVAL s, and dropped after DB_KEEPALIVES_COUNT unanswered probes (25 s);
# - tcp_user_timeout: one whose sent data stays unacknowledged for DB_TCP_USER_TIMEOUT_MS
#   (a statement sent into a partition) is dropped.
# Where the far kernel still acknowledges (a frozen server, a proxy that lost its upstream) TCP
# cannot tell: worker processes also cut a round trip silent for DB_ROUND_TRIP_SECONDS
# (ops.dbwatch; 0 turns it off; it must exceed the longest statement a worker runs).
# docs/liveness.md › Silent connections.
def postgres_connection_bounds() -> dict:
    return {
        "connect_timeout": env_int("DB_CONNECT_TIMEOUT", 3),
        "keepalives": 1 if env_bool("DB_KEEPALIVES", True) else 0,
        "keepalives_idle": env_int("DB_KEEPALIVES_IDLE", 10),
        "keepalives_interval": env_int("DB_KEEPALIVES_INTERVAL", 5),
        "keepalives_count": env_int("DB_KEEPALIVES_COUNT", 3),
        "tcp_user_timeout": env_int("DB_TCP_USER_TIMEOUT_MS", 30_000),
    }


def sqlite_database(path: str) -> dict:
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": path,
        "CONN_MAX_AGE": env_int("CONN_MAX_AGE", 600),
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": {
            # WAL lets readers run beside the writer; IMMEDIATE takes the write lock at BEGIN so
            # two writers queue on the busy timeout instead of failing with "database is locked".
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }
