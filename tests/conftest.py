"""Suite-wide fixtures: test settings, and one user per role."""
import pytest
from django.conf import settings

from memweb import celery_app

pytest_plugins = ["tests.fixtures.users", "tests.fakes.openai_server", "tests.browser"]


@pytest.fixture(autouse=True)
def _test_settings(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # No collectstatic in tests: plain storage, served from the finders.
    settings.STORAGES = {**settings.STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    # Otherwise WhiteNoise rescans every static file for each new test client (~1 s each).
    settings.WHITENOISE_AUTOREFRESH = True


    # A per-test in-memory cache: login/API-key failure counters of one test must not throttle the next.
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "tests"}}
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def _eager_celery():
    """Unit tests run tasks in-process; tests marked `worker` use a real worker instead."""
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


def pytest_sessionfinish(session, exitstatus):
    if getattr(settings, "EMBEDDED_DB_STARTED_HERE", False):
        from memweb import embedded_db

        embedded_db.stop(embedded_db.EmbeddedServer(settings.DATA_DIR))
