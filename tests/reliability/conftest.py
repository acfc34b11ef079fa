"""Fixtures shared by the reliability tests: an admin agent's API key, and row counts for
proving that a refused input wrote nothing."""
import pytest
from django.apps import apps

from memweb.models import ApiKey
from tests.evaluation.conftest import builtin  # noqa: F401  (fixture: the built-in task set)


@pytest.fixture
def admin_key_headers(role_admin_user) -> dict:
    """Headers of a program holding an admin's key: every route's role check passes."""
    _, secret = ApiKey.issue(user=role_admin_user, name="reliability")
    return {"Authorization": f"Bearer {secret}"}


def row_counts(*labels: str) -> dict[str, int]:
    """Rows per model ("app.Model"), to compare before and after a refused input."""
    return {label: apps.get_model(label).objects.count() for label in labels}
