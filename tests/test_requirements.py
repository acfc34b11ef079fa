"""Production installs requirements.txt alone; `make test` adds requirements-test.txt. The split
holds only if each set is closed under its packages' own dependencies (read from the installed
metadata), and if no test tool is left among the runtime pins."""
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
# What a virtual environment brings by itself (torch asks for setuptools).
ENVIRONMENT = {"setuptools", "pip"}
TEST_TOOLS = {"pytest", "pytest-django", "pytest-xdist", "playwright", "hypothesis", "schemathesis", "ruff"}


def pinned(name: str) -> set[str]:
    lines = (ROOT / name).read_text().splitlines()
    return {canonicalize_name(line.split("==")[0]) for line in lines if "==" in line and not line.startswith("#")}


def dependencies(package: str) -> set[str]:
    """The unconditional dependencies of an installed package (no extras asked for)."""
    requirements = [Requirement(text) for text in metadata.distribution(package).requires or ()]
    return {canonicalize_name(req.name) for req in requirements
            if req.marker is None or req.marker.evaluate({"extra": ""})}


def unpinned_dependencies(packages: set[str], allowed: set[str]) -> dict[str, set[str]]:
    return {package: missing for package in sorted(packages)
            if (missing := dependencies(package) - allowed - ENVIRONMENT)}


def test_runtime_requirements_hold_no_test_tool():
    runtime = pinned("requirements.txt")
    assert not runtime & TEST_TOOLS, runtime & TEST_TOOLS
    assert not runtime & pinned("requirements-test.txt"), "a package is pinned in both files"


def test_test_requirements_build_on_the_runtime_ones():
    assert "-r requirements.txt" in (ROOT / "requirements-test.txt").read_text().splitlines()
    assert TEST_TOOLS <= pinned("requirements-test.txt")


def test_each_set_pins_every_dependency_of_its_packages():
    runtime, test = pinned("requirements.txt"), pinned("requirements-test.txt")
    assert unpinned_dependencies(runtime, runtime) == {}
    assert unpinned_dependencies(test, runtime | test) == {}


def make_recipe(target: str) -> list[str]:
    """The command lines of a Makefile target."""
    lines = (ROOT / "Makefile").read_text().split(f"\n{target}:\n", 1)[1].split("\n\n")[0].splitlines()
    return [line.strip() for line in lines if line.startswith("\t")]


def test_make_run_installs_the_runtime_set_and_make_test_both():
    assert "scripts/bootstrap.sh" in make_recipe("run")
    assert make_recipe("test") == ["scripts/test.sh"]
    assert "scripts/bootstrap.sh --test" in (ROOT / "scripts" / "test.sh").read_text()
    assert "--test) REQUIREMENTS=requirements-test.txt" in (ROOT / "scripts" / "bootstrap.sh").read_text()
