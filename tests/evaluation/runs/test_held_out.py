"""Held-out tasks (issue 28): a run's tasks split into train (memory learns from them) and test
(success is measured on them), the DMRM train/test preset, and held-out runs through export,
import and comparison."""
from evaluation.runs.models import EvaluationRun, RunEpisode
from evaluation.runs.services import run_drive


def test_it_writes_memory_only_from_train_episodes_and_measures_the_test_split(launch):
    run = run_drive(run=launch(evaluation_mode="held_out", split_rule="task_set"))
    assert run.status == EvaluationRun.Status.COMPLETED
    assert run.task_splits == {"shop-app-001": "train", "shop-app-023": "test", "shop-clo-008": "train"}
    rows = RunEpisode.objects.filter(run=run)
    assert {(row.task_key, row.split) for row in rows} == set(run.task_splits.items())
    assert rows.filter(split="train", orb__isnull=False).count() == 6
    assert not rows.filter(split="test", orb__isnull=False).exists()
    assert run.metrics["split"] == "test" and run.metrics["tasks"] == 1 and run.metrics["train"]["tasks"] == 2
