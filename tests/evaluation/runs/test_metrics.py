"""Metrics on run data: the success matrix comes from the run's rows (an infrastructure error is
neither success nor failure) and evaluation.metrics turns it into the charted series."""
import pytest

from evaluation.metrics import run_metrics
from evaluation.runs.services import run_drive, run_import, run_matrix, run_metrics_compute


def _file(results: dict[str, list]) -> dict:
    episodes = [{"task_id": task, "trial": trial, "status": "error" if ok is None else "done", "success": ok,
                 "reward": None if ok is None else float(ok), "turns": 4, "tokens": 0, "latency_ms": 10}
                for task, row in results.items() for trial, ok in enumerate(row, start=1)]
    return {"format": "memweb.evaluation-run", "format_version": 1,
            "run": {"name": "hand-computed", "trials": 3}, "episodes": episodes}


def test_it_computes_the_hand_worked_example(db):
    run = run_import(data=_file({"A": [True, False, True], "B": [False, False, None]}))
    assert run_matrix(run=run, trials=3) == {"A": [True, False, True], "B": [False, False, None]}
    metrics = run.metrics
    # Trial 3: only A has a verdict. The error is counted apart, not as a failure.
    assert metrics["per_trial"]["value"] == [0.5, 0.0, 1.0]
    assert metrics["per_trial"]["errors"] == [0, 0, 1] and metrics["errors"]["total"] == 1
    assert metrics["cumulative"]["value"] == [0.5, 0.5, 0.5]
    # Pass^1 = mean(2/3, 0/2); Pass^2 = mean(C(2,2)/C(3,2), 0) = 1/6; no Pass^3 (B has n = 2).
    assert metrics["pass_k"]["x"] == [1, 2]
    assert metrics["pass_k"]["value"] == pytest.approx([1 / 3, 1 / 6])
    assert metrics["reward"]["mean"] == pytest.approx(2 / 5)
    low, high = metrics["per_trial"]["low"][0], metrics["per_trial"]["high"][0]
    assert 0.0 <= low <= 0.5 <= high <= 1.0


def test_the_metrics_of_a_played_run_match_its_episodes(launch):
    run = run_drive(run=launch(memory_mode="none"))
    by_task = {}
    for row in run.run_episodes.select_related("episode", "trial").order_by("trial__number"):
        by_task.setdefault(row.task_key, []).append(row.episode.success)
    expected = run_metrics(by_task, rewards=[r.episode.reward for r in run.run_episodes.select_related("episode")],
                           seed=run.run_spec.seed)
    for series in ("per_trial", "cumulative", "pass_k"):
        assert run.metrics[series]["value"] == pytest.approx(expected[series]["value"])
    assert run.metrics["reward"]["mean"] == pytest.approx(expected["reward"]["mean"])


def test_metrics_of_the_first_trials_only(launch):
    run = run_drive(run=launch(memory_mode="none"))
    partial = run_metrics_compute(run=run, trials=2)
    assert partial["trials"] == 2 and partial["per_trial"]["x"] == [1, 2]
    assert partial["per_trial"]["value"] == run.metrics["per_trial"]["value"][:2]
