"""The demo's runs are really played (through the run services, in-process), labelled scripted,
and loaded once."""
import io

from django.db.models import F

from evaluation.models import Episode
from evaluation.runs.demo import DEMO_RUNS, DMRM_DEMO_RUN, DMRM_SOURCE_BANK, load_demo
from evaluation.runs.models import EvaluationRun
from orbs.dmrm.models import SourceMemory


def test_the_demo_plays_its_scripted_runs_once(db):
    out = io.StringIO()
    load_demo(stdout=out, run_tasks=4, run_trials=2)
    runs = {run.name: run for run in EvaluationRun.objects.filter(name__in=[name for name, _ in DEMO_RUNS])}
    assert set(runs) == {name for name, _ in DEMO_RUNS}
    baseline, memory = (runs[name] for name, _ in DEMO_RUNS)
    for run in (baseline, memory):
        assert run.status == "completed" and run.scripted and run.executor == "inline"
        assert run.episodes_finished == 8 and run.metrics["per_trial"]["x"] == [1, 2]
    assert baseline.bank is None and memory.bank.orbs.count() >= 4 and memory.run_spec.memory_k == 5
    # Same seed and error rates: both runs plan the same mistakes, so the comparison is paired.
    seeds = lambda run: list(run.run_episodes.order_by("trial__number", "task_key").values_list("seed", flat=True))  # noqa: E731
    assert seeds(baseline) == seeds(memory)
    episodes = Episode.objects.count()
    load_demo(stdout=out, run_tasks=4, run_trials=2)
    assert EvaluationRun.objects.count() == len(DEMO_RUNS) + 2 and Episode.objects.count() == episodes
    assert "demo run" in out.getvalue()
    # Issue 18: the first start's demo had no DMRM memory at all; now a DMRM run with a source memory.
    run = EvaluationRun.objects.get(name=DMRM_DEMO_RUN)
    assert run.status == "completed" and run.memory_mode == "dmrm" and run.bank_copied_from == DMRM_SOURCE_BANK
    assert run.bank.experiences.filter(memory="target").exists()
    assert run.bank.experiences.filter(memory="source").exists()  # copied with the source bank
    source = SourceMemory.objects.get(bank__name=DMRM_SOURCE_BANK)
    assert source.source_domain == "appliances" and source.experiences.exists()


def test_an_interrupted_demo_run_is_continued(db):
    load_demo(stdout=io.StringIO(), run_tasks=2, run_trials=1)
    run = EvaluationRun.objects.get(name=DEMO_RUNS[1][0])
    row = run.run_episodes.first()
    # As a crash mid-episode leaves it: the row claimed, not stored, not counted; the trial unfinished.
    undo = {"episodes_finished": F("episodes_finished") - 1, "successes": F("successes") - int(row.success)}
    EvaluationRun.objects.filter(pk=run.pk).update(status="running", **undo)
    run.trial_rows.update(status="running", **undo)
    Episode.objects.filter(pk=row.episode_id).delete()
    type(row).objects.filter(pk=row.pk).update(status="running", claimed_by="inline", episode=None)
    load_demo(stdout=io.StringIO(), run_tasks=2, run_trials=1)
    run.refresh_from_db()
    row.refresh_from_db()
    assert run.status == "completed" and row.status == "done" and row.attempts == 2
    assert run.episodes_finished == 2 and Episode.objects.filter(run_episode__run=run).count() == 2
