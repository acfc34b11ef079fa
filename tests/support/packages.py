"""The plug-in packages of examples/ installed as pip installs any third-party package: each built
from a copy of its source (the build writes beside the sources, never into the checkout) into a
folder of its own, then made importable here and in every worker process started from here."""
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def package_install(name: str, scratch: Path) -> Path:
    """examples/<name> pip-installed into a folder under `scratch`; that folder."""
    source, target = scratch / f"{name}-source", scratch / f"{name}-site"
    shutil.copytree(EXAMPLES / name, source)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(source)], check=True, cwd=source)
    return target


@contextmanager
def packages_importable(*targets: Path) -> Iterator[None]:
    """`targets` on sys.path and PYTHONPATH until the block ends; then the packages' modules are
    forgotten, so the next test meets memweb without them."""
    saved_path, saved_env = list(sys.path), os.environ.get("PYTHONPATH")
    modules_before = set(sys.modules)
    sys.path[:0] = [str(target) for target in targets]
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [*map(str, targets), saved_env]))
    try:
        yield
    finally:
        sys.path[:] = saved_path
        os.environ.pop("PYTHONPATH") if saved_env is None else os.environ.update(PYTHONPATH=saved_env)
        roots = {path.name for target in targets for path in target.iterdir() if path.suffix != ".dist-info"}
        for module in set(sys.modules) - modules_before:
            if module.split(".")[0] in roots:
                del sys.modules[module]
