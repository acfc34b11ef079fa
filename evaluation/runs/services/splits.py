"""Held-out tasks: which of a run's tasks build memory (train) and which measure it (test).

A replay run asks whether an agent learns on the tasks it meets again; a held-out run asks whether
what it learnt transfers to tasks it never saw (MemoryBench feeds feedback on training cases only;
the DMRM paper tests on tasks disjoint from those that built memory). The split is fixed at launch
and kept on the run (`task_splits`) and on each episode row (`RunEpisode.split`), so the metrics of
a split are one filter away and an exported run carries it.
"""
import hashlib
from collections import defaultdict

from evaluation.runs.models import EvaluationMode, EvaluationRun, RunEpisode, SplitRule, TaskSplit
from evaluation.runs.services.spec import RunSpec


def _rank(seed: int, key: str) -> str:
    """A task's place in the seeded shuffle: the same seed holds out the same tasks on every server."""
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def _by_fraction(tasks: list[tuple[str, str]], fraction: float, seed: int) -> dict[str, str]:
    """Per domain, the `fraction` of its tasks first in the seeded shuffle are test, the rest train:
    each domain is represented in both splits as far as its size allows."""
    domains: dict[str, list[str]] = defaultdict(list)
    for key, domain in tasks:
        domains[domain].append(key)
    splits = {}
    for keys in domains.values():
        ranked = sorted(keys, key=lambda key: _rank(seed, key))
        tests = min(len(keys) - 1, max(1, round(fraction * len(keys)))) if len(keys) > 1 else 0
        splits |= {key: TaskSplit.TEST if place < tests else TaskSplit.TRAIN for place, key in enumerate(ranked)}
    return splits


def _by_label(labels: list[tuple[str, str]]) -> dict[str, str]:
    """The task set's own labels: train is train; test and dev are never learnt from, so test."""
    return {key: TaskSplit.TRAIN if label == TaskSplit.TRAIN else TaskSplit.TEST for key, label in labels}


def task_splits_assign(*, spec: RunSpec, tasks) -> dict[str, str]:
    """Task external id -> train or test for the selected `tasks` (a Task queryset); empty for a replay run."""
    if spec.evaluation_mode == EvaluationMode.REPLAY:
        return {}
    if spec.split_rule == SplitRule.TASK_SET:
        return _by_label(list(tasks.values_list("external_id", "split")))
    return _by_fraction(list(tasks.values_list("external_id", "domain")), spec.test_fraction, spec.seed)


def split_problems(*, spec: RunSpec, splits: dict[str, str]) -> list[tuple[str, str]]:
    """What makes the held-out settings unusable, as (field, message) pairs."""
    problems = []
    if spec.train_trials is not None and spec.evaluation_mode != EvaluationMode.TRAIN_TEST:
        problems.append(("train_trials", "is only used when evaluation_mode is train_test"))
    if spec.evaluation_mode == EvaluationMode.TRAIN_TEST:
        problems += _train_test_problems(spec)
    if spec.evaluation_mode != EvaluationMode.REPLAY and splits:
        values = list(splits.values())
        train, test = values.count(TaskSplit.TRAIN), values.count(TaskSplit.TEST)
        if not train or not test:
            problems.append(("split_rule", f"held-out tasks need at least one train and one test task; the "
                                           f"{len(values)} selected tasks give {train} train and {test} test "
                                           f"(rule {spec.split_rule})"))
    return problems


def _train_test_problems(spec: RunSpec) -> list[tuple[str, str]]:
    train_trials = spec.train_trials_resolved()
    if spec.trials < 2 or train_trials >= spec.trials:
        return [("train_trials", f"must be less than trials ({spec.trials}): the test split needs at least one "
                                 f"trial, got {train_trials}")]
    test_trials = spec.trials - train_trials
    if spec.pass_k is not None and spec.pass_k > test_trials:
        return [("pass_k", f"Pass^k with k={spec.pass_k} needs at least {spec.pass_k} test trials; the run has "
                           f"{test_trials} (trials {spec.trials} minus train_trials {train_trials})")]
    return []


def episodes_planned(*, spec: RunSpec, task_count: int, splits: dict[str, str]) -> int:
    """Episodes the run will play: a train-then-test run plays each split in its own trials only."""
    if spec.evaluation_mode != EvaluationMode.TRAIN_TEST:
        return task_count * spec.trials
    train = list(splits.values()).count(TaskSplit.TRAIN)
    train_trials = spec.train_trials_resolved()
    return train * train_trials + (task_count - train) * (spec.trials - train_trials)


def trial_split(run: EvaluationRun, trial_number: int) -> str | None:
    """The one split a train-then-test run's trial plays; None when the trial plays every task."""
    if run.run_spec.evaluation_mode != EvaluationMode.TRAIN_TEST:
        return None
    return TaskSplit.TRAIN if trial_number <= run.run_spec.train_trials_resolved() else TaskSplit.TEST


def learns_from(row: RunEpisode) -> bool:
    """The one rule every memory write of a run obeys: held-out (test) episodes teach memory nothing."""
    return row.split != TaskSplit.TEST


def learning_rows(rows):
    """`learns_from` as a filter of RunEpisode rows."""
    return rows.exclude(split=TaskSplit.TEST)


def measured_split(run: EvaluationRun) -> str:
    """The split a run's headline metrics are on: test for a held-out run, every task ("") otherwise."""
    return TaskSplit.TEST if run.held_out else ""


def run_measured_text(run: EvaluationRun) -> str:
    """What the run measured, for its page, its API answer and the comparison's verdict."""
    if not run.held_out:
        return "replayed tasks (within-task learning: the same tasks every trial)"
    counts = run.split_counts()
    text = f"held-out tasks ({counts[TaskSplit.TRAIN]} train / {counts[TaskSplit.TEST]} test"
    spec = run.run_spec
    if spec.evaluation_mode == EvaluationMode.TRAIN_TEST:
        train = spec.train_trials_resolved()
        text += f"; trials 1–{train} train, {train + 1}–{spec.trials} test with memory frozen"
    return text + ")"
