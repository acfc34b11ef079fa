"""What the ECom-Bench tests share: the benchmark's JSON form from the shared folder (never
committed here), read once, and an in-memory world store in place of the Django one."""
import copy
import functools
import os
from pathlib import Path

import pytest

from evaluation.environments import benchmark
from evaluation.environments.benchmark import BenchmarkSource
from evaluation.environments.ecom_bench import ECOM

REPO = Path(__file__).resolve().parents[3]
PLATFORM, SHOP, USER = "jd", "5de650c946e7c3001814990f", "cnjd喜哥2号"


def benchmarks_dir() -> Path:
    """MEMWEB_BENCHMARKS_DIR, else ../shared/benchmarks beside the repository, else /work/shared/benchmarks."""
    if os.environ.get("MEMWEB_BENCHMARKS_DIR"):
        return Path(os.environ["MEMWEB_BENCHMARKS_DIR"])
    beside = REPO.parent / "shared" / "benchmarks"
    return beside if beside.is_dir() else Path("/work/shared/benchmarks")


def ecom_folder() -> Path:
    folder = benchmarks_dir() / "ecom-bench"
    assert (folder / "tasks.json").is_file(), (
        f"{folder}: the ECom-Bench JSON form is missing (set MEMWEB_BENCHMARKS_DIR to the folder holding ecom-bench/)")
    return folder


@functools.cache
def _source() -> BenchmarkSource:
    return ECOM.read_source(ecom_folder())


@pytest.fixture
def ecom_source() -> BenchmarkSource:
    """The JSON form, read once per session (tests must not change it: copy what they change)."""
    return _source()


@pytest.fixture
def ecom_tasks(ecom_world) -> list[dict]:
    """The 53 task specs (a private copy), with their world in the store."""
    return copy.deepcopy(_source().tasks)


@pytest.fixture
def ecom_world(monkeypatch) -> BenchmarkSource:
    """The benchmark's world in an in-memory store; the store in place before comes back afterwards."""
    source = _source()
    monkeypatch.setattr(benchmark, "_loader", None)
    monkeypatch.setattr(benchmark, "_cache", {})
    stored = {source.tasks[0]["world"]: source.world}

    def load(key: str):
        if key not in stored:
            raise LookupError(f"no world {key}")
        return stored[key]

    benchmark.world_loader_set(load)
    return source


@pytest.fixture
def database(ecom_source) -> dict:
    """A private copy of the benchmark's initial database."""
    return copy.deepcopy(ecom_source.world.database)
