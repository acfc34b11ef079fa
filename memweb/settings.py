"""memweb settings: everything comes from the environment (see README's table)."""
import secrets
import sys
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from memweb import embedded_db
from memweb.env import env_bool, env_choice, env_float, env_hosts, env_int, env_list, env_networks, env_str
from memweb.llm.config import read_prices

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("MEMWEB_DATA_DIR", str(BASE_DIR / ".data")))


def _local_secret_key() -> str:
    """A per-checkout key kept in the git-ignored data folder, so sessions
    survive restarts without anyone having to invent a key locally."""
    path = DATA_DIR / "secret_key"
    if not path.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


DEBUG = env_bool("DEBUG", False)
SECRET_KEY_IS_NODE_LOCAL = not env_str("SECRET_KEY")
SECRET_KEY = env_str("SECRET_KEY") or _local_secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
for _origin in CSRF_TRUSTED_ORIGINS:
    if "://" not in _origin:
        raise ImproperlyConfigured(
            f"CSRF_TRUSTED_ORIGINS entry {_origin!r} needs a scheme, e.g. https://memweb.example.com"
        )

INSTALLED_APPS = [
    "memweb.admin_site.SuperuserAdminConfig",  # Django's admin site, for superusers only
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",  # OpClass in index expressions (memweb/vectors.py's per-dimension HNSW indexes)
    "django_htmx",
    "ninja",
    "memweb",
    "orbs",
    "evaluation",
    "annotation",
]

MIDDLEWARE = [
    # Outermost, so that every answer (whitenoise's static files, redirects, errors) carries the policy.
    "memweb.middleware.ContentSecurityPolicy",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "memweb.workspaces.CurrentWorkspace",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Needs the session user (above); wraps ApiJsonErrors so that what it stores and replays is the
    # JSON answer the client got.
    "memweb.idempotency.IdempotencyKeys",
    "memweb.middleware.ApiJsonErrors",
]

ROOT_URLCONF = "memweb.urls"
WSGI_APPLICATION = "memweb.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "memweb.roles.roles_context",
                "memweb.demo_loading.demo_loading_context",
                "memweb.workspaces.archived_workspace_context",
            ],
        },
    },
]


# --- Database: DATABASE_URL, else the embedded PostgreSQL in DATA_DIR ---
# Importing settings starts nothing: each entry point that talks to the database (manage.py, the WSGI
# app, a Celery worker, the test session) starts the embedded server with embedded_db.ensure_configured().
EMBEDDED_DB_NAME = "memweb"
USES_EMBEDDED_DB = not env_str("DATABASE_URL")
if USES_EMBEDDED_DB:
    DATABASE_URL = embedded_db.EmbeddedServer(DATA_DIR).url(EMBEDDED_DB_NAME)
else:
    DATABASE_URL = env_str("DATABASE_URL")
    if not DATABASE_URL.startswith(("postgres://", "postgresql://")):
        raise ImproperlyConfigured("DATABASE_URL must be a postgresql:// URL (memweb needs PostgreSQL with pgvector)")
# Health checks: a kept connection that a database restart cut is replaced before a request uses it,
# instead of failing that request (each web thread's first request after a restart answered 500/503).
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0),
                                              conn_health_checks=True)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Shared by all web workers (the LLM endpoints' probed capabilities), with no extra service.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "memweb_cache"}}
# The largest Orb `context` (compact JSON, bytes) a write may store: it is embedded with its Orb and
# returned with every hit (orbs.context_filter).
ORBS_CONTEXT_MAX_BYTES = env_int("MEMWEB_CONTEXT_MAX_BYTES", 16 * 1024, minimum=256)
MEMWEB_AUTH_MAX_FAILURES = env_int("MEMWEB_AUTH_MAX_FAILURES", 10, minimum=1)
MEMWEB_AUTH_FAILURE_WINDOW_SECONDS = env_int("MEMWEB_AUTH_FAILURE_WINDOW_SECONDS", 300, minimum=1)
# The reverse proxies whose X-Forwarded-For names the client (memweb.auth.client_ip); none by default.
MEMWEB_TRUSTED_PROXIES = env_networks("MEMWEB_TRUSTED_PROXIES")
# How long an API write's Idempotency-Key is remembered (and its answer replayed); a day, as clients
# retry within minutes.
MEMWEB_IDEMPOTENCY_TTL_SECONDS = env_int("MEMWEB_IDEMPOTENCY_TTL_SECONDS", 24 * 3600, minimum=1)
# Internal webhook receivers memweb may post to (memweb.webhook_targets): by default none, so a
# webhook cannot reach this machine or its private networks.
MEMWEB_WEBHOOK_ALLOW_HOSTS = env_hosts("MEMWEB_WEBHOOK_ALLOW_HOSTS")

# --- E-mail: set-password links for new accounts and password resets (memweb.mail) ---
# "file" (the default) writes each message into DATA_DIR/mail, so a fresh machine with no mail server
# works and an admin can still read what was sent; "console" prints them; "smtp" sends them.
EMAIL_DELIVERY = env_choice("MEMWEB_EMAIL_BACKEND", "file", ("file", "console", "smtp"))
EMAIL_BACKEND = {"file": "django.core.mail.backends.filebased.EmailBackend",
                 "console": "django.core.mail.backends.console.EmailBackend",
                 "smtp": "django.core.mail.backends.smtp.EmailBackend"}[EMAIL_DELIVERY]
EMAIL_FILE_PATH = env_str("MEMWEB_EMAIL_FILE_PATH") or str(DATA_DIR / "mail")
EMAIL_HOST = env_str("MEMWEB_EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("MEMWEB_EMAIL_PORT", 25, minimum=1, maximum=65535)
EMAIL_HOST_USER = env_str("MEMWEB_EMAIL_USER")
EMAIL_HOST_PASSWORD = env_str("MEMWEB_EMAIL_PASSWORD")
EMAIL_USE_TLS = env_bool("MEMWEB_EMAIL_STARTTLS", False)
EMAIL_USE_SSL = env_bool("MEMWEB_EMAIL_SSL", False)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("MEMWEB_EMAIL_STARTTLS and MEMWEB_EMAIL_SSL exclude each other: set one")
# A mail server that does not answer must not hold a sign-in page's request for long.
EMAIL_TIMEOUT = env_int("MEMWEB_EMAIL_TIMEOUT_SECONDS", 10, minimum=1)
DEFAULT_FROM_EMAIL = env_str("MEMWEB_EMAIL_FROM", "memweb <memweb@localhost>")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("vendor/chart.js", BASE_DIR / "node_modules" / "chart.js" / "dist"),
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
# Tests and local runs serve straight from the finders, so no collectstatic is needed to see a page.
WHITENOISE_USE_FINDERS = True

# --- Security: strict when DEBUG is off (check --deploy runs clean in production) ---
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_SECONDS > 0
SECURE_HSTS_PRELOAD = SECURE_HSTS_SECONDS > 0
if env_bool("BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Sent on every response (memweb.middleware.ContentSecurityPolicy). Scripts only from our own static
# files: no inline script, event-handler attribute or eval (json_script blocks are data, not scripts).
# Styles only from our sheets: no style element or attribute (bars get their width from page.js;
# htmx's injected indicator style is off through base.html's htmx-config, its rules are in app.css).
CONTENT_SECURITY_POLICY = {
    "default-src": ("'self'",),
    "script-src": ("'self'",),
    "style-src": ("'self'",),
    "img-src": ("'self'", "data:"),
    "font-src": ("'self'",),
    "connect-src": ("'self'",),
    "object-src": ("'none'",),
    "frame-ancestors": ("'none'",),
    "base-uri": ("'self'",),
    "form-action": ("'self'",),
}


# --- Celery: CELERY_BROKER_URL, else kombu's SQLAlchemy transport on our PostgreSQL ---
def _default_broker_url() -> str:
    """kombu's SQLAlchemy transport on the same PostgreSQL: a durable queue with no extra service."""
    scheme, rest = DATABASE_URL.split("://", 1)
    return f"sqla+postgresql+psycopg://{rest}"


CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or _default_broker_url()
CELERY_TASK_ALWAYS_EAGER = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# kombu hands the sqla transport's options to SQLAlchemy's create_engine.
CELERY_BROKER_TRANSPORT_OPTIONS = {"pool_pre_ping": True} if CELERY_BROKER_URL.startswith("sqla+") else {}
# How often a worker polls the database broker while its queue is empty (memweb/celery.py).
BROKER_POLL_SECONDS = env_float("MEMWEB_BROKER_POLL_SECONDS", 0.1, minimum=0.01, maximum=10.0)
WORKER_HEARTBEAT_SECONDS = env_int("MEMWEB_WORKER_HEARTBEAT_SECONDS", 10, minimum=1)
# A job queued this long with no worker claiming it has its message sent again (memweb/jobs.py).
JOB_RESEND_SECONDS = env_int("MEMWEB_JOB_RESEND_SECONDS", 120, minimum=1)
# Episodes of an evaluation run that one message claims and plays; 0 = chosen per run
# (evaluation/runs/services/protocol.py, chunk_size).
RUN_CHUNK_EPISODES = env_int("MEMWEB_RUN_CHUNK_EPISODES", 0, minimum=0, maximum=1000)

# --- LLM roles (memweb/llm) and embeddings (memweb/embeddings.py) ---
LLM_ROLES: dict = {}  # role -> RoleConfig, read by MemwebConfig.ready() for the roles the apps declare
LLM_BACKOFF_SECONDS = env_float("MEMWEB_LLM_BACKOFF_SECONDS", 0.5, minimum=0.0)
LLM_BACKOFF_MAX_SECONDS = env_float("MEMWEB_LLM_BACKOFF_MAX_SECONDS", 20.0, minimum=0.0)
# Dollars per million tokens by model name; a model left out shows its cost as unknown, not 0.
LLM_PRICES = read_prices(env_str("MEMWEB_LLM_PRICES"))
EMBEDDING_MODEL = env_choice("MEMWEB_EMBEDDING_MODEL", "all-MiniLM-L6-v2", ("all-MiniLM-L6-v2", "bge-m3"))
EMBEDDING_MODEL_PATH = env_str("MEMWEB_EMBEDDING_MODEL_PATH")
if EMBEDDING_MODEL == "bge-m3" and not EMBEDDING_MODEL_PATH:
    raise ImproperlyConfigured("MEMWEB_EMBEDDING_MODEL=bge-m3 needs MEMWEB_EMBEDDING_MODEL_PATH (a folder with its weights)")
# Which library runs all-MiniLM-L6-v2 (memweb/embeddings.py): auto = ONNX Runtime when the export checked
# against torch is on disk (`python -m memweb.onnx_export`, run by scripts/bootstrap.sh), else torch.
EMBEDDING_BACKEND = env_choice("MEMWEB_EMBEDDING_BACKEND", "auto", ("auto", "onnx", "torch"))
if EMBEDDING_MODEL == "bge-m3" and EMBEDDING_BACKEND == "onnx":
    raise ImproperlyConfigured("MEMWEB_EMBEDDING_BACKEND=onnx serves all-MiniLM-L6-v2 only; bge-m3 embeds with torch")
# Where the ONNX exports live, one folder per model; by default inside the virtual environment they were made for.
ONNX_DIR = env_str("MEMWEB_ONNX_DIR") or str(Path(sys.prefix) / "share" / "memweb" / "onnx")
EMBEDDING_BATCH_SIZE = env_int("MEMWEB_EMBEDDING_BATCH_SIZE", 64, minimum=1, maximum=4096)
# Query vectors kept per process (memweb.embeddings.query_embed), keyed by model and text; 0 keeps none.
EMBEDDING_QUERY_CACHE_SIZE = env_int("MEMWEB_EMBEDDING_QUERY_CACHE_SIZE", 4096, minimum=0, maximum=1_000_000)
# How long the first of several concurrent queries waits for others to share its model call.
EMBEDDING_BATCH_WINDOW_MS = env_float("MEMWEB_EMBEDDING_BATCH_WINDOW_MS", 2.0, minimum=0.0)
# Each web worker loads the model as it starts (memweb/gunicorn_conf.py). The serve tests that check something
# else turn this off: two loads competing for a busy 2-core machine add tens of seconds to each start.
EMBEDDING_WARMUP = env_bool("MEMWEB_EMBEDDING_WARMUP", True)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"one_line_refusals": {"()": "memweb.logfilters.OneLineRefusals"}},
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    # Refused requests are logged where they are refused: django.request (pages and the API's
    # session checks) and django.security.
    "loggers": {name: {"filters": ["one_line_refusals"]} for name in ("django.request", "django.security")},
    "root": {"handlers": ["console"], "level": env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR"))},
}
