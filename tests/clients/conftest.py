"""The client packages live outside the Django project (clients/python is its own distribution):
the suite imports the Python one from the checkout, as a developer of it would."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHON_CLIENT = ROOT / "clients" / "python"
if str(PYTHON_CLIENT) not in sys.path:
    sys.path.insert(0, str(PYTHON_CLIENT))


@pytest.fixture
def api_key(operator_user) -> str:
    from memweb.models import ApiKey

    return ApiKey.issue(user=operator_user, name="integration")[1]
