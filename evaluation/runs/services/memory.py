"""A run's memory: the one place where evaluation runs write to orbs and orbs.dmrm.

It records how each run episode's retrievals ended (the only writer of those outcomes for run
episodes: orbs' ingest fills in only outcomes nobody recorded).
"""
from evaluation.models import Episode
from evaluation.services import EpisodePlay, episode_ref
from orbs.services import retrieval_outcome_record


def run_episode_outcome_record(*, play: EpisodePlay, episode: Episode) -> None:
    """Inside the transaction that stores the episode, so a dropped copy records nothing."""
    retrieval_outcome_record(retrieval_ids=play.retrieval_ids, success=episode.success, reward=episode.reward,
                             episode_ref=episode_ref(episode))
