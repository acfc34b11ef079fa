"""Fixtures of the custom-score tests: a small finished run, a score defined on its task set."""
import pytest

from evaluation.runs.services import run_drive
from tests.evaluation.runs.conftest import launch  # noqa: F401  (fixture)
from tests.fakes.openai_server import fake_llm  # noqa: F401  (fixture)


@pytest.fixture
def finished_run(launch):  # noqa: F811
    """3 tasks x 1 trial without memory, played to the end by the scripted agent."""
    return run_drive(run=launch(memory_mode="none", trials=1, agent={"error_rates": {}}, name="scored run"))
