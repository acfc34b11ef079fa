"""The integrator's first hour, as the issue puts it: a fresh virtualenv pip-installs memweb-client from
the checkout (httpx from PyPI or pip's cache) and runs the README's agent loop against a live memweb."""
import os
import re
import shutil
import subprocess
import sys
import venv

import pytest

from orbs.models import EpisodeRecord, MemoryBank, Orb, RetrievalLog
from tests.clients.conftest import PYTHON_CLIENT, ROOT

README_LOOP = re.compile(r"```python\n(# memweb-integrate-example.*?)```", re.DOTALL)


def fresh_venv_with_client(where) -> str:
    venv.EnvBuilder(with_pip=True, clear=True).create(where / "venv")
    python = str(where / "venv" / "bin" / "python")
    # setuptools builds in the source folder (build/, *.egg-info): a copy of the checkout's subdirectory,
    # as committed, keeps the checkout untouched and leaves no earlier build's files to package.
    source = shutil.copytree(PYTHON_CLIENT, where / "memweb-client",
                             ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
    installed = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                str(source)], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return python


@pytest.mark.django_db(transaction=True)  # the live server's thread reads what the test wrote
def test_a_fresh_virtualenv_installs_the_client_and_runs_the_readme_agent_loop(tmp_path, live_server, api_key):
    python = fresh_venv_with_client(tmp_path)
    loop = tmp_path / "agent_loop.py"
    loop.write_text(README_LOOP.search((ROOT / "README.md").read_text()).group(1))
    # Outside the checkout and without its environment: only what pip installed can be imported.
    environment = {"PATH": os.environ["PATH"], "MEMWEB_URL": live_server.url, "MEMWEB_API_KEY": api_key}
    ran = subprocess.run([python, "-I", str(loop)], cwd=tmp_path, env=environment, capture_output=True, text=True,
                         timeout=300)
    assert ran.returncode == 0, ran.stderr
    where = subprocess.run([python, "-I", "-c", "import memweb_client, httpx; print(memweb_client.__file__)"],
                           cwd=tmp_path, env=environment, capture_output=True, text=True, check=True)
    assert where.stdout.startswith(str(tmp_path / "venv")) and sys.prefix not in where.stdout

    assert ran.stdout.split() == ["done", "pending"]
    bank = MemoryBank.objects.get(slug="support")  # the loop made it: a fresh instance has none
    episode = EpisodeRecord.objects.get(episode_ref="ticket-1")
    assert episode.status == EpisodeRecord.Status.DONE and episode.orb.bank == bank
    assert Orb.objects.filter(bank=bank, outcome__icontains="offer the return at once").exists()
    outcomes = RetrievalLog.objects.filter(bank=bank).values_list("outcome_success", "outcome_reward",
                                                                  "outcome_episode_ref")
    assert list(outcomes) == [(True, 1.0, "ticket-1")] * 2
