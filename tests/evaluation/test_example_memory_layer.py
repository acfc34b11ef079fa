"""The example memory layer of docs/MEMORY_LAYERS.md, installed as a separate package (its entry point
in the `memweb.memory_layers` group), runs end to end: the registry finds it, a run launches with
it, plays two trials whose second is told about the first, exports its header, and compares with a
no-memory run through the API."""
from pathlib import Path

import pytest
from django.utils.html import escape

from evaluation.memory_layers.registry import UnknownMemoryLayer, memory_layer, memory_layers_refresh
from evaluation.runs.services import run_drive, run_export_json, run_launch
from memweb.models import ApiKey
from tests.evaluation.runs.conftest import TASK_IDS, spec
from tests.support.packages import package_install, packages_importable


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    return package_install("memweb_example_layer", tmp_path_factory.mktemp("layer"))


@pytest.fixture
def example_layer(installed):
    """The package importable here and in any worker process started from here; the registry looks again."""
    with packages_importable(installed):
        memory_layers_refresh()
        yield memory_layer("last_outcome")
    memory_layers_refresh()


def test_an_unknown_layer_is_refused_with_the_known_ones_named(db):
    memory_layers_refresh()
    with pytest.raises(UnknownMemoryLayer, match="unknown memory layer 'last_outcome'; the known layers are none, "):
        memory_layer("last_outcome")


def test_the_installed_example_layer_runs_a_comparison_end_to_end(example_layer, builtin, operator_user, client):
    assert type(example_layer).__module__ == "memweb_example_layer"
    tasks = TASK_IDS[:2]
    plain = run_drive(run=run_launch(spec=spec(name="no memory", memory_mode="none", trials=2, task_ids=tasks),
                                     user=operator_user))  # the oldest run is the comparison's baseline
    remembered = run_drive(run=run_launch(spec=spec(name="example layer", memory_mode="last_outcome", trials=2,
                                                    task_ids=tasks), user=operator_user))
    assert (remembered.status, plain.status) == ("completed", "completed") and remembered.bank is not None
    records = {(row.trial.number, row.task_key): row.episode.memories[0]["last_outcome"]
               for row in remembered.run_episodes.select_related("trial", "episode")}
    assert {key: record["retrieved"] for key, record in records.items()} == {
        (1, tasks[0]): 0, (1, tasks[1]): 0, (2, tasks[0]): 1, (2, tasks[1]): 1}
    first = remembered.run_episodes.get(trial__number=1, task_key=tasks[0]).episode
    told = records[(2, tasks[0])]
    assert told["episode_ids"] == [first.pk]
    assert ("succeeded" if first.success else "failed") in told["prompt_block"]
    header = run_export_json(run=remembered)["run"]
    assert header["memory_mode"] == "last_outcome"
    assert header["memory_layer"] == {"layer": "last_outcome", "label": example_layer.label,
                                      "package": "memweb_example_layer", "version": "0.1.0"}
    _, secret = ApiKey.issue(user=operator_user, name="example layer")
    compared = client.get("/api/evaluation/runs/compare", {"runs": [plain.pk, remembered.pk]},
                          HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert compared.status_code == 200, compared.content
    pair = compared.json()["pairs"][0]
    assert (pair["baseline"], pair["run"]) == (plain.pk, remembered.pk) and pair["verdict"]
    client.force_login(operator_user)
    page = client.get(f"/evaluation/runs/compare/?runs={plain.pk}&runs={remembered.pk}").content.decode()
    assert escape(example_layer.label) in page and escape(pair["verdict"].split(".")[0]) in page
    detail = client.get(remembered.get_absolute_url()).content.decode()
    assert escape(f"{example_layer.label} · k=5 · shows the run's earlier attempts at the task") in detail
    assert 'id="run-memory-page">its memories</a>' in detail
