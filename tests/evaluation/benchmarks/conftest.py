"""The τ²-bench retail data of ../shared/benchmarks (never committed), read once per session, and a
world store holding its database for the Django-free tests."""
import pytest

from evaluation.environments import benchmark
from evaluation.environments.tau2_retail import TAU2_RETAIL


@pytest.fixture(scope="session")
def tau2_dir():
    folder = benchmark.benchmarks_dir() / "tau2-retail"
    assert (folder / "tasks.json").is_file(), f"the τ²-bench retail data is missing from {folder}"
    return folder


@pytest.fixture(scope="session")
def tau2_source(tau2_dir):
    return TAU2_RETAIL.read_source(tau2_dir)


@pytest.fixture
def tau2_world(tau2_source):
    """The source's world served from memory (not the BenchmarkWorld table); the app's store is put back after."""
    key = tau2_source.tasks[0]["world"]
    previous = benchmark._loader
    benchmark.world_loader_set(lambda wanted: tau2_source.world if wanted == key else _missing(wanted))
    yield key
    benchmark.world_loader_set(previous)


def _missing(key: str):
    raise LookupError(f"no world {key}")


@pytest.fixture
def tau2_tasks(tau2_source, tau2_world):
    return {spec["id"]: spec for spec in tau2_source.tasks}
