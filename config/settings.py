"""vitalflow settings: one module, everything read from the environment with safe local defaults
(config/env.py reads it, config/database.py turns DATABASE_URL into DATABASES)."""

import contextlib
import os
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from config.database import (  # noqa: F401 - database_from_url and sqlite_database for callers
    BASE_DIR,
    PROJECT_ROOT,
    database_from_url,
    postgres_connection_bounds,
    sqlite_database,
)
from config.env import (  # noqa: F401 - every helper, for callers and the settings below
    env_bool,
    env_duration,
    env_float,
    env_int,
    env_list,
    env_retention,
    env_str,
)

DB_ROUND_TRIP_SECONDS = float(env_str("DB_ROUND_TRIP_SECONDS", "30"))

SECRET_KEY = env_str("SECRET_KEY", "dev-only-insecure-secret-key-change-me")
# Off by default: with DEBUG on, Django answers errors with HTML pages instead of the JSON contract.
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

# Behind TLS in production: HTTPS=1 turns on secure cookies, the redirect and HSTS; the proxy
# must send X-Forwarded-Proto. Off by default so `make run` works over plain http.
HTTPS = env_bool("HTTPS", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_SSL_REDIRECT = HTTPS
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 3600 if HTTPS else 0)
# Only once every subdomain serves HTTPS (and, for preload, after submitting to hstspreload.org).
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if HTTPS else None
# Probes from the orchestrator (compose healthchecks, Prometheus) come over plain HTTP from
# inside the network: answering them a redirect to https would fail every check.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_q",
    # Admin login lockout per username + IP (AXES_* below).
    "axes",
    "ops",
    "workflows",
    "graphs",
    "ingest",
    "labs",
    # Always installed, also with a real Terra key: it has no models, URLs or admin, installs its
    # simulator only in demo mode, and its commands (rundemo, terra_simulate) stay available.
    "demo",
]

MIDDLEWARE = [
    "ops.middleware.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Terra's POSTs go from here to the webhook view: nothing below is of use to them.
    "ingest.webhook.WebhookShortcut",
    # Static files (admin CSS/JS, Swagger UI) from the app itself: no --insecure, no extra server.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes requires: answers a locked-out login attempt.
    "axes.middleware.AxesMiddleware",
]

AUTHENTICATION_BACKENDS = [
    # Refuses a login while its username + IP pair is locked out, before the password check.
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # Every template lives in its app's templates/ folder, so an installed wheel has them.
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

VAR_DIR = Path(env_str("VAR_DIR", str(PROJECT_ROOT / "var")))
DATABASE_URL = env_str("DATABASE_URL")
if not DATABASE_URL:
    # SQLite cannot create its file in a missing folder; a fresh checkout has no var/ yet.
    VAR_DIR.mkdir(parents=True, exist_ok=True)
DATABASES = {
    "default": database_from_url(DATABASE_URL)
    if DATABASE_URL
    else sqlite_database(str(VAR_DIR / "vitalflow.sqlite3"))
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
# WhiteNoise also serves straight from the apps' static folders, so `serve`, `make run` and a
# wheel install work before (or without) `collectstatic`; collectstatic fills STATIC_ROOT.
WHITENOISE_USE_FINDERS = True
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(VAR_DIR / "static")))
# WhiteNoise warns about a missing root until the first collectstatic; a read-only image ran
# collectstatic at build time (or the finders serve the files).
with contextlib.suppress(OSError):
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)
MEDIA_ROOT = env_str("MEDIA_ROOT", str(VAR_DIR / "media"))
MEDIA_URL = "media/"

# S3-compatible storage by settings only: set STORAGE_BACKEND=storages.backends.s3.S3Storage and
# the AWS_* variables django-storages reads (install django-storages[s3] on that deployment).
STORAGES = {
    "default": {
        "BACKEND": env_str("STORAGE_BACKEND", "django.core.files.storage.FileSystemStorage")
    },
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# --- Terra ----------------------------------------------------------------------------------
TERRA_API_URL = env_str("TERRA_API_URL", "https://api.tryterra.co").rstrip("/")
TERRA_DEV_ID = env_str("TERRA_DEV_ID", "vitalflow-demo")
TERRA_API_KEY = env_str("TERRA_API_KEY")
# Comma-separated: every listed secret is accepted, so a secret can be rotated without downtime.
TERRA_WEBHOOK_SECRETS = env_list(
    "TERRA_WEBHOOK_SECRET", "" if env_str("TERRA_API_KEY") else "demo-webhook-secret"
)
TERRA_SIGNATURE_TOLERANCE_SECONDS = env_int("TERRA_SIGNATURE_TOLERANCE_SECONDS", 300)
# Calls to Terra's API, across every process (Terra limits each developer); empty: no pacing. A
# call waits at most TERRA_API_MAX_WAIT_SECONDS for its turn or for a 429/503's Retry-After.
TERRA_API_RATE_PER_SECOND = env_float("TERRA_API_RATE_PER_SECOND", 5.0)
TERRA_API_MAX_WAIT_SECONDS = env_int("TERRA_API_MAX_WAIT_SECONDS", 30)
# X-Terra-Ordering-Timestamp is not signed: a stamp is believed at most this far ahead of receipt.
TERRA_ORDERING_MAX_AHEAD_SECONDS = env_int("TERRA_ORDERING_MAX_AHEAD_SECONDS", 300)
# No API key means demo mode: the built-in simulator answers the Terra client.
TERRA_DEMO_MODE = not TERRA_API_KEY
TERRA_WEBHOOK_MAX_BYTES = env_int("TERRA_WEBHOOK_MAX_BYTES", 50 * 1024 * 1024)
# s3_payload pings (ingest.normalizers.s3_payload): the hosts their pre-signed URLs may name,
# exact or ".suffix"; anything else is refused. Downloads are capped at TERRA_WEBHOOK_MAX_BYTES.
TERRA_S3_PAYLOAD_HOSTS = env_list("TERRA_S3_PAYLOAD_HOSTS", ".amazonaws.com")
# A ping's download (connect included) ends within this; well under INGEST_LEASE_SECONDS.
TERRA_S3_PAYLOAD_DEADLINE_SECONDS = env_int("TERRA_S3_PAYLOAD_DEADLINE_SECONDS", 30)
# Where the demo simulator posts its webhooks (the running web server).
# The webhook's database work waits at most this long, then answers 503 + Retry-After (a frozen
# database never answers; Terra gives up after about 8 s). 0 runs it inline (the test suite).
TERRA_WEBHOOK_DB_DEADLINE_SECONDS = float(env_str("TERRA_WEBHOOK_DB_DEADLINE_SECONDS", "4"))
# A consumer's claim on a row lasts this long: a row whose worker died runs again after it.
INGEST_LEASE_SECONDS = float(env_str("INGEST_LEASE_SECONDS", "90"))
# A delivery with more data items than this is normalized in pieces of this many, each committed
# with its progress and a renewed lease, so a huge one finishes (and resumes after a failure).
INGEST_PIECE_ITEMS = env_int("INGEST_PIECE_ITEMS", 2000)
# The in-cluster poller that runs rows due again (retries, parked backoff, expired leases); 0 off.
INGEST_POLL_SECONDS = float(env_str("INGEST_POLL_SECONDS", "1"))
# Worker heartbeats (ops.liveness): every qcluster and runworkflows beats this often; a process
# is stale after two missed beats and leaves the console's list after HEARTBEAT_FORGET_SECONDS.
HEARTBEAT_SECONDS = float(env_str("HEARTBEAT_SECONDS", "15"))
HEARTBEAT_FORGET_SECONDS = float(env_str("HEARTBEAT_FORGET_SECONDS", "3600"))
# A process that beats but has finished no work (a row, a step boundary) for this long while
# work it could take has waited this long is shown stuck (console, /readyz?verbose=1).
WORKER_STUCK_SECONDS = float(env_str("WORKER_STUCK_SECONDS", "120"))
TERRA_DEMO_WEBHOOK_URL = env_str("TERRA_DEMO_WEBHOOK_URL", "http://127.0.0.1:8000/webhook/terra")

LAB_UPLOAD_MAX_BYTES = env_int("LAB_UPLOAD_MAX_BYTES", 10 * 1024 * 1024)
# --- Lab upload screening (labs/screening.py): refused before anything is stored or forwarded.
# Images (JPEG, PNG, and images inside PDFs) over this many pixels, read from their headers.
LAB_UPLOAD_MAX_PIXELS = env_int("LAB_UPLOAD_MAX_PIXELS", 100_000_000)
# PDFs whose streams decode to more than this in total (checked by a bounded, streaming inflate).
LAB_UPLOAD_MAX_PDF_DECODED_BYTES = env_int("LAB_UPLOAD_MAX_PDF_DECODED_BYTES", 256 * 1024 * 1024)
# How long the lab-report workflow waits for Terra's lab_report webhook (engine duration grammar).
LAB_REPORT_TIMEOUT = env_duration("LAB_REPORT_TIMEOUT", "2 hours")
TRACE_RETENTION_DAYS = env_int("TRACE_RETENTION_DAYS", 30)

# --- Workflows ------------------------------------------------------------------------------
# Demo mode (no Terra key) also loads the example workflow `make run` starts, so every process
# of the demo — web, cluster, `manage.py workflows` in another terminal — knows it.
WORKFLOWS_MODULES = env_list("WORKFLOWS_MODULES", "demo.examples" if TERRA_DEMO_MODE else "")
WORKFLOWS_LEASE_SECONDS = env_int("WORKFLOWS_LEASE_SECONDS", 30)
# Claims in a row that end without progress (the runner died: OOM kill, segfault) before the
# next claim errors the instance with MaxRecoveryAttemptsExceeded (docs/workflows/faults.md).
WORKFLOWS_MAX_RECOVERY_ATTEMPTS = env_int("WORKFLOWS_MAX_RECOVERY_ATTEMPTS", 10)
# Off only where something else drives the runner (the test harness, benches).
WORKFLOWS_WAKE_TASKS = env_bool("WORKFLOWS_WAKE_TASKS", True)
# Retention of finished instances (a workflow's own `retention=` wins status by status); the
# daily workflows-gc schedule deletes what is past it. Unset keeps everything forever.
WORKFLOWS_RETENTION = env_retention("WORKFLOWS_RETENTION")
# Log lines of kept instances older than this are pruned by the same run; unset keeps them.
WORKFLOWS_LOG_RETENTION = env_duration("WORKFLOWS_LOG_RETENTION", None)
# Instances deleted per transaction: small enough that no table is locked for long.
WORKFLOWS_GC_BATCH_SIZE = env_int("WORKFLOWS_GC_BATCH_SIZE", 500)
# Authoring limits, checked where a workflow calls the engine (workflows/limits.py; the table in
# docs/workflows/engine.md). Text limits default to their column's width: raise one only with a
# wider column, or the database refuses the value (the instance then fails with that error).
WORKFLOWS_INSTANCE_ID_MAX = env_int("WORKFLOWS_INSTANCE_ID_MAX", 100)
WORKFLOWS_EVENT_TYPE_MAX = env_int("WORKFLOWS_EVENT_TYPE_MAX", 100)
WORKFLOWS_STEP_NAME_MAX = env_int("WORKFLOWS_STEP_NAME_MAX", 256)
WORKFLOWS_LOG_CATEGORY_MAX = env_int("WORKFLOWS_LOG_CATEGORY_MAX", 64)
WORKFLOWS_LOG_MESSAGE_MAX = env_int("WORKFLOWS_LOG_MESSAGE_MAX", 2048)
# Params, event payloads, step results, log data and outputs, as compact JSON.
WORKFLOWS_JSON_MAX_BYTES = env_int("WORKFLOWS_JSON_MAX_BYTES", 1024 * 1024)
# step.do, wait_for_event and run_workflow rows of one run (sleeps are not counted).
WORKFLOWS_STEPS_PER_RUN_MAX = env_int("WORKFLOWS_STEPS_PER_RUN_MAX", 1024)
WORKFLOWS_SLEEP_MAX = env_duration("WORKFLOWS_SLEEP_MAX", "365 days")
WORKFLOWS_STEP_TIMEOUT_MAX = env_duration("WORKFLOWS_STEP_TIMEOUT_MAX", "365 days")
# retries={"delay", "max_delay"}; also where exponential backoff stops growing.
WORKFLOWS_RETRY_DELAY_MAX = env_duration("WORKFLOWS_RETRY_DELAY_MAX", "365 days")
WORKFLOWS_WAIT_TIMEOUT_MIN = env_duration("WORKFLOWS_WAIT_TIMEOUT_MIN", "1 second")
WORKFLOWS_WAIT_TIMEOUT_MAX = env_duration("WORKFLOWS_WAIT_TIMEOUT_MAX", "365 days")
# Extra authorization per operation: {"create": "pkg.mod.fn", "manage": [...], ...}; see
# docs/workflows/http.md. Code-only (no env): a policy is a function, not a value.
WORKFLOWS_POLICIES: dict = {}

# Graph workflows (graphs app): hosts the http action may reach although they resolve to
# private/loopback addresses ("host:port", comma-separated), and the secrets its headers may
# name — GRAPHS_SECRET_<NAME> in the environment becomes {"secret": "<NAME>"}.
GRAPHS_HTTP_ALLOWED_HOSTS = env_list("GRAPHS_HTTP_ALLOWED_HOSTS")
# The http action's calls per second to one host, across every process (ops.pacing); empty: off.
GRAPHS_HTTP_RATE_PER_HOST = env_float("GRAPHS_HTTP_RATE_PER_HOST", 10.0)
GRAPHS_HTTP_SECRETS = {
    key[len("GRAPHS_SECRET_") :]: value
    for key, value in os.environ.items()
    if key.startswith("GRAPHS_SECRET_")
}

# --- Demo (`make run`) ----------------------------------------------------------------------
# The terminal shows the banner and little else: rundemo runs its processes at LOG_LEVEL WARNING
# and gunicorn without access log, unless this is on (or LOG_LEVEL is set).
DEMO_VERBOSE = env_bool("DEMO_VERBOSE", False)

# Graph runs: the most branches one fan-out (foreach / spawn_count) may open. A larger
# collection fails its node before any branch is built (docs/graphs/README.md, "Limits").
GRAPHS_MAX_FAN_OUT = env_int("GRAPHS_MAX_FAN_OUT", 1000)
if GRAPHS_MAX_FAN_OUT < 1:
    raise ImproperlyConfigured(f"GRAPHS_MAX_FAN_OUT must be ≥ 1, got {GRAPHS_MAX_FAN_OUT}")

# Graph runs' human nodes are answered only through the graphs API and console, which check who
# may answer, four-eyes and one answer per node: the workflow routes and console refuse events
# to graph-run instances. A deployment listing its own "events" policies keeps this one too.
WORKFLOWS_POLICIES["events"] = ["graphs.policies.answers_through_graphs"]

# --- django-q2 ------------------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL")
Q_CLUSTER = {
    "name": env_str("Q_CLUSTER_NAME", "vitalflow"),
    "workers": env_int("Q_WORKERS", 2),
    "recycle": 1000,
    # timeout < retry: a task still running at `retry` would otherwise be handed out twice.
    "timeout": env_int("Q_TIMEOUT", 300),
    "retry": env_int("Q_RETRY", 360),
    "max_attempts": 3,
    "catch_up": False,
    "ack_failures": True,
    "save_limit": 500,
    "label": "Task queue",
    "bulk": 10,
    "poll": 0.1,
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"
if env_bool("Q_SYNC", False):
    Q_CLUSTER["sync"] = True

# --- API ------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "ops.auth.AdminKeyAuthentication",
        "ops.auth.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["ops.parsers.StrictJSONParser"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "ops.errors.api_exception_handler",
    # ops.throttling: per operator key, per user, per anonymous IP, in the shared cache.
    "DEFAULT_THROTTLE_CLASSES": ["ops.throttling.ApiThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "operator": env_str("THROTTLE_OPERATOR_RATE", "600/minute") or None,
        "user": env_str("THROTTLE_USER_RATE", "600/minute") or None,
        "anon": env_str("THROTTLE_ANON_RATE", "120/minute") or None,
    },
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "vitalflow API",
    "DESCRIPTION": "Terra ingest, labs, sync and durable workflows.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # /api/docs/ loads Swagger UI from drf-spectacular-sidecar's static files, not a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# GET /metrics needs an operator key with the metrics:read scope unless this is true (a scrape
# from a private network only). Multiprocess counters: PROMETHEUS_MULTIPROC_DIR (serve sets it).
METRICS_PUBLIC = env_bool("METRICS_PUBLIC", False)
# Console pages that refresh themselves (ops/static/ops/console.js) poll this often while
# something is in flight.
CONSOLE_LIVE_INTERVAL_MS = env_int("CONSOLE_LIVE_INTERVAL_MS", 3000)

LOGIN_URL = "/admin/login/"

# The cache holds what every process must agree on (/v1/me's reconcile spacing). Redis when
# configured, else a table in the database (created by migrate: ops/migrations/0003_cache_table),
# never per-process memory. Throttles and the audit flood bound count in the database instead
# (ops.ratestore: one atomic upsert, exact with any number of workers).
CACHE_TABLE = "vitalflow_cache"
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "vitalflow",
        }
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": CACHE_TABLE,
            # Every write counts the table to decide on culling: keep it small; expired
            # throttle windows are culled first.
            "OPTIONS": {"MAX_ENTRIES": 20000, "CULL_FREQUENCY": 3},
        }
    }

# Admin login (django-axes): a username + IP pair is locked out after LOGIN_FAILURE_LIMIT
# failures for LOGIN_LOCKOUT_MINUTES; another username from the same IP still logs in.
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15))
AXES_RESET_ON_SUCCESS = True
AXES_DISABLE_ACCESS_LOG = True  # successful logins need no row each
AXES_VERBOSE = False
AXES_CLIENT_IP_CALLABLE = "ops.throttling.client_ip_or_none"
# Trusted reverse proxies in front (each appends to X-Forwarded-For): the client IP that
# throttles, the login lockout and the audit log use is the one the outermost proxy saw.
# 0: REMOTE_ADDR (nothing in front, or a proxy that connects as the client).
PROXY_HOPS = env_int("PROXY_HOPS", 0)
# GET /v1/me asks Terra for the user's subscriptions at most this often per user.
ME_RECONCILE_SECONDS = env_int("ME_RECONCILE_SECONDS", 300)

LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
# plain: one readable line; json: one JSON object per line (python-json-logger) carrying
# request_id and, where known, raw_event_id / workflow, workflow_instance_id, workflow_run.
LOG_FORMAT = env_str("LOG_FORMAT", "plain")
if LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be plain or json, got {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "ops.request_id.RequestIdLogFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["request_id"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
