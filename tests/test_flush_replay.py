"""A transactional test's flush writes back post_migrate's rows from a copy (tests/fixtures/flush.py):
the copy must hold everything the signal writes, so running the real signal after it adds nothing."""
import pytest
from django.core.management import call_command
from django.db import connection

from tests.fixtures.flush import _real_emit


def _row_counts() -> dict[str, int]:
    counts = {}
    with connection.cursor() as cursor:
        for table in connection.introspection.django_table_names(only_existing=True, include_views=False):
            cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(table)}")
            counts[table] = cursor.fetchone()[0]
    return counts


@pytest.mark.django_db(transaction=True)
def test_the_rows_written_back_after_a_flush_are_all_that_post_migrate_writes():
    call_command("flush", verbosity=0, interactive=False)  # the first in this process may be the real signal
    call_command("flush", verbosity=0, interactive=False)  # written back from the copy
    replayed = _row_counts()
    assert replayed["auth_permission"] and replayed["auth_group"] and replayed["django_content_type"]

    _real_emit(0, False, "default")

    assert _row_counts() == replayed
