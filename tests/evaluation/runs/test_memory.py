"""A run's memory (evaluation/runs/services/memory.py): retrieval outcomes, bank set-up and what
each trial's end writes into memory."""
from evaluation.runs.services import run_drive
from evaluation.services import episode_ref
from orbs.models import RetrievalLog


def test_it_records_each_retrievals_outcome_with_the_run_episode_that_used_it(launch):
    run = run_drive(run=launch(trials=2))
    rows = list(run.run_episodes.filter(trial__number=2).select_related("episode"))
    for row in rows:
        log = RetrievalLog.objects.get(pk=row.episode.memories[0]["retrieval_id"])
        assert (log.outcome_success, log.outcome_reward) == (row.success, row.reward)
        assert log.outcome_episode_ref == episode_ref(row.episode)
