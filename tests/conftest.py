"""Suite-wide fixtures: test settings, and one user per role."""
import pytest
from django.conf import settings
from pytest_django.plugin import blocking_manager_key

from memweb import embedded_db
from memweb.celery import app as celery_app

_DB_STARTED_HERE = pytest.StashKey[bool]()

pytest_plugins = ["tests.fixtures.database", "tests.fixtures.flush", "tests.fixtures.users", "tests.fakes.openai_server",
                  "tests.browser"]


@pytest.fixture(autouse=True)
def _test_settings(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # No collectstatic in tests: plain storage, served from the finders.
    settings.STORAGES = {**settings.STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    # Otherwise WhiteNoise rescans every static file for each new test client (~1 s each).
    settings.WHITENOISE_AUTOREFRESH = True


    # A per-test in-memory cache: what one test caches (an LLM endpoint's probed capabilities) must not reach the next.
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "tests"}}
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def _eager_celery():
    """Unit tests run tasks in-process; tests marked `worker` use a real worker instead."""
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


# Tests that only run when their marker is asked for (`-m NAME`): each needs minutes or a server
# that `make test` does not install (make llm-smoke, make test-two-nodes).
OPT_IN_MARKERS = ("llm_server", "two_nodes")


def pytest_collection_modifyitems(config, items):
    asked = config.getoption("markexpr") or ""
    skipped = [marker for marker in OPT_IN_MARKERS if marker not in asked]
    chosen = [item for item in items if not any(item.get_closest_marker(marker) for marker in skipped)]
    if len(chosen) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in chosen])
    items[:] = _long_runs_first(chosen)


_DB_FIXTURES = {"db", "transactional_db", "live_server", "django_db_reset_sequences", "django_db_serialized_rollback"}


def _long_runs_first(items: list) -> list:
    """Real-process tests that need no test database (`serve`: minutes in all) go first. pytest-django
    puts tests without a database last, and work stealing (scripts/test.sh) takes a process's queue from
    its end: left there, they were taken late by one process and ran on alone while the others were done.
    Tests with a database keep pytest-django's order (a transactional test empties tables others read)."""
    def first(item) -> bool:
        uses_db = item.get_closest_marker("django_db") or _DB_FIXTURES & set(getattr(item, "fixturenames", ()))
        return bool(item.get_closest_marker("worker")) and not uses_db
    return sorted(items, key=lambda item: not first(item))  # stable: the order within each part stays


def pytest_configure(config):
    # Settings start nothing; the test session starts the embedded database itself, and stops it
    # at the end only when it was the one that started it.
    config.stash[_DB_STARTED_HERE] = embedded_db.ensure_configured()


def pytest_sessionfinish(session, exitstatus):
    if _is_xdist_controller(session.config):
        from tests.fixtures.database import drop_template

        with session.config.stash[blocking_manager_key].unblock():
            drop_template()  # the processes' copies of it are gone with them
    if session.config.stash.get(_DB_STARTED_HERE, False):
        embedded_db.stop(embedded_db.EmbeddedServer(settings.DATA_DIR))


def _is_xdist_controller(config) -> bool:
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", None))
