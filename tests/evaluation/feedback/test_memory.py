"""Feedback as procedural memory: Orbs that carry the critique; off- and on-policy ordering."""
import pytest

from evaluation.feedback.models import EpisodeFeedback
from evaluation.feedback.services import (
    feedback_for_episode,
    feedback_offpolicy,
    feedback_onpolicy,
    feedback_to_orbs,
)
from orbs.models import Orb
from orbs.services import bank_get_or_create
from tests.evaluation.feedback.conftest import play_many


@pytest.fixture
def bank(db):
    return bank_get_or_create(name="feedback memory", auto_approve="always")


def test_it_turns_critiques_and_actions_into_orbs(bank, failed_episode, success_episode):
    failed = feedback_for_episode(episode=failed_episode, seed=0)
    passed = feedback_for_episode(episode=success_episode, seed=0)
    results = feedback_to_orbs(episodes=[failed_episode, success_episode], bank=bank)
    assert [r.created for r in results] == [True, True]
    complaint, praise = (r.orb for r in results)
    assert complaint.obs.endswith(failed.response)  # the user's reply is the Orb's last utterance
    assert complaint.context["user_feedback"] == {
        "critique": failed.response, "behavior": "continue_conversation", "satisfaction": 5,
        "action": failed.action, "copied": failed.copied, "critique_backend": "scripted",
        "score_backend": "scripted"}
    assert "user_satisfaction" in complaint.outcome  # the offline reflector names the unmet component
    assert praise.context["user_feedback"]["critique"] == passed.reasoning
    assert passed.reasoning not in praise.obs  # an ending user says nothing more
    assert complaint.source_label == "simulated feedback"
    assert complaint.episode_ref == f"evaluation-episode:{failed_episode.pk}:feedback"
    again = feedback_to_orbs(episodes=[failed_episode], bank=bank)
    assert not again[0].created and again[0].orb.pk == complaint.pk


def test_it_refuses_episodes_without_feedback_before_storing_any(bank, failed_episode, success_episode):
    feedback_for_episode(episode=failed_episode, seed=0)
    with pytest.raises(ValueError, match=rf"\[{success_episode.pk}\]"):
        feedback_to_orbs(episodes=[failed_episode, success_episode], bank=bank)
    assert not Orb.objects.exists()


def test_off_policy_judges_every_episode_before_memory_gets_any_batch(bank, builtin):
    episodes = play_many(builtin, 3)
    batches = feedback_offpolicy(episodes=episodes, bank=bank, batch_size=2, seed=4)
    assert [b.episode_ids for b in batches] == [[episodes[0].pk, episodes[1].pk], [episodes[2].pk]]
    assert [b.index for b in batches] == [0, 1]
    latest_feedback = max(EpisodeFeedback.objects.values_list("created_at", flat=True))
    orbs = Orb.objects.order_by("timestamp", "pk")
    assert orbs.count() == 3 and latest_feedback <= orbs.first().timestamp
    assert [o.episode_ref for o in orbs] == [f"evaluation-episode:{e.pk}:feedback" for e in episodes]
    assert [o.pk for o in orbs] == [pk for b in batches for pk in b.orb_ids]
    assert set(EpisodeFeedback.objects.values_list("seed", flat=True)) == {4}
    with pytest.raises(ValueError, match="batch_size"):
        feedback_offpolicy(episodes=episodes, bank=bank, batch_size=0)


def test_on_policy_updates_memory_from_each_batch_before_the_next_plays(bank, builtin):
    seen = []

    def batch(first_seed: int):
        def play(current_bank):
            seen.append((Orb.objects.filter(bank=current_bank).count(), EpisodeFeedback.objects.count()))
            return play_many(builtin, 2, seed=first_seed, bank=current_bank.name)
        return play

    batches = feedback_onpolicy(batches=[batch(0), batch(10)], bank=bank.name)
    assert seen == [(0, 0), (2, 2)]
    first_orbs = set(batches[0].orb_ids)
    second = EpisodeFeedback.objects.filter(episode_id__in=batches[1].episode_ids).select_related("episode")
    hits = {hit["orb_id"] for f in second for memory in f.episode.memories for hit in memory["hits"]}
    assert hits and hits <= first_orbs  # the second batch's agent was reminded of the first batch's feedback
    assert Orb.objects.count() == 4
