"""A trial's episodes written as one batch give what writing them one at a time gives: the same
Orbs (ids, statuses, near-duplicate links), audit rows, episode records and idempotency; and DMRM
trajectories learnt as one batch give the same Q-table."""
import pytest

from orbs.dmrm.models import Experience, ExperienceTrajectory
from orbs.dmrm.services import TrajectoryToLearn, dmrm_settings_update, experiences_from_trajectories
from orbs.dmrm.services.learning import experiences_from_trajectory
from orbs.models import EpisodeRecord, MemoryBank, Orb, ReviewEvent
from orbs.services import EpisodeToRemember, bank_get_or_create, orb_from_episode, orbs_from_episodes
from tests.orbs.conftest import success_trajectory, trajectory

pytestmark = pytest.mark.django_db


def _bank(name: str, **policy) -> MemoryBank:
    bank = bank_get_or_create(name=name)
    MemoryBank.objects.filter(pk=bank.pk).update(**policy)
    return MemoryBank.objects.get(pk=bank.pk)


def _a_trial() -> list[EpisodeToRemember]:
    """Episodes with every case: new Orbs approved by rule and left pending, the same Orb twice, a
    near-duplicate of an Orb of the same batch, and one of an Orb the bank held before."""
    return [EpisodeToRemember(t, f"episode-{n}") for n, t in enumerate([
        success_trajectory("My kettle stopped heating water this morning."),
        trajectory(),
        success_trajectory("My kettle stopped heating water this morning."),
        success_trajectory("My kettle stopped heating water this morning!"),
        success_trajectory("The jacket I ordered is too small, can I exchange it?"),
        success_trajectory("I was charged twice for the washing machine."),
    ])]


_EARLIER = [(success_trajectory("The jacket I ordered is too small, can I exchange it"), "earlier"),
            (success_trajectory("I was charged twice for the washing machine."), "earlier-too")]


def _stored_before(bank: MemoryBank) -> None:
    for earlier, ref in _EARLIER:
        orb_from_episode(bank=bank, trajectory=earlier, episode_ref=ref)


def _hash(orb: Orb | None) -> str | None:
    return orb.content_hash if orb else None


def _outcome(results) -> list[tuple]:
    return [(r.orb.content_hash, r.created, r.orb.status, _hash(r.near_duplicate_of), _hash(r.orb.near_duplicate_of),
             round(r.orb.near_duplicate_score, 4) if r.orb.near_duplicate_score is not None else None)
            for r in results]


def _audit(bank: MemoryBank) -> list[tuple]:
    return [(e.orb.content_hash, e.action, e.before, e.after, e.note, e.actor_name)
            for e in ReviewEvent.objects.filter(orb__bank=bank).select_related("orb").order_by("id")]


def _records(bank: MemoryBank) -> list[tuple]:
    return [(r.episode_ref, r.source, r.source_label, r.status, r.created_orb, _hash(r.orb), r.trajectory, r.error)
            for r in EpisodeRecord.objects.filter(bank=bank).select_related("orb").order_by("id")]


def _one_at_a_time(bank: MemoryBank, episodes: list[EpisodeToRemember]):
    return [orb_from_episode(bank=bank, trajectory=e.trajectory, episode_ref=e.episode_ref, source_label="trial 1")
            for e in episodes]


def test_a_batch_writes_what_one_episode_at_a_time_writes():
    policy = {"auto_approve": MemoryBank.AutoApprove.BY_RULE}
    alone, batched = _bank("one at a time", **policy), _bank("batched", **policy)
    for bank in (alone, batched):
        _stored_before(bank)
    episodes = _a_trial()

    expected = _one_at_a_time(alone, episodes)
    results = orbs_from_episodes(bank=batched, episodes=episodes, source_label="trial 1")

    assert _outcome(results) == _outcome(expected)
    assert _audit(batched) == _audit(alone)
    assert _records(batched) == _records(alone)
    statuses = [r.orb.status for r in results]
    assert Orb.Status.APPROVED in statuses and Orb.Status.PENDING in statuses  # the gate was exercised
    assert results[2].orb == results[0].orb and not results[2].created  # the same Orb twice
    assert results[3].near_duplicate_of == results[0].orb  # a near-duplicate within the batch
    assert results[4].near_duplicate_of is not None and results[4].near_duplicate_of.episode_ref == "earlier"
    assert not results[5].created and results[5].orb.episode_ref == "earlier-too"


def test_a_batch_written_again_adds_nothing():
    bank = _bank("twice")
    episodes = _a_trial()
    first = orbs_from_episodes(bank=bank, episodes=episodes)
    counts = (Orb.objects.filter(bank=bank).count(), ReviewEvent.objects.filter(orb__bank=bank).count(),
              EpisodeRecord.objects.filter(bank=bank).count())

    again = orbs_from_episodes(bank=bank, episodes=episodes)

    assert [r.orb.pk for r in again] == [r.orb.pk for r in first]
    assert not any(r.created for r in again)
    assert (Orb.objects.filter(bank=bank).count(), ReviewEvent.objects.filter(orb__bank=bank).count(),
            EpisodeRecord.objects.filter(bank=bank).count()) == counts


def test_a_per_customer_batch_compares_each_customer_with_their_own_orbs():
    per_customer = MemoryBank.CustomerScope.PER_CUSTOMER
    banks = [_bank(name, customer_scope=per_customer) for name in ("per customer alone", "per customer batched")]
    text = "My kettle stopped heating water this morning."
    episodes = [EpisodeToRemember(success_trajectory(text, customer_key=customer), f"e-{n}")
                for n, customer in enumerate(["ann", "bob", "ann"])]
    expected = _one_at_a_time(banks[0], episodes)
    results = orbs_from_episodes(bank=banks[1], episodes=episodes, source_label="trial 1")
    assert _outcome(results) == _outcome(expected)
    assert results[1].created and results[1].near_duplicate_of is None  # bob's first, whatever ann holds
    assert _audit(banks[1]) == _audit(banks[0])


# --- DMRM ------------------------------------------------------------------------------------

def _dmrm_trajectory(text: str, reward: float, **overrides) -> dict:
    calls = [{"role": "user", "content": text},
             {"role": "assistant", "content": "", "tool_calls": [{"name": "find_user", "arguments": {"name": "Ann"}}]},
             {"role": "tool", "tool_name": "find_user", "content": '{"user_id": "u1"}'},
             {"role": "assistant", "content": "", "tool_calls": [{"name": "get_order", "arguments": {"order_id": "W1"}}]},
             {"role": "tool", "tool_name": "get_order", "content": '{"status": "delivered"}'},
             {"role": "assistant", "content": "Done."}]
    return success_trajectory(text, messages=calls, reward=reward, success=reward >= 1, **overrides)


def _q_table(bank) -> list[tuple]:
    return sorted((e.state_key, e.action_key, round(e.q_value, 9), e.visits, e.bootstraps, e.success, e.trajectory_id,
                   e.step) for e in Experience.objects.filter(bank=bank))


def _trajectories(bank) -> list[tuple]:
    return sorted((t.trajectory_id, t.steps, t.success) for t in ExperienceTrajectory.objects.filter(bank=bank))


@pytest.mark.parametrize("state_match", ["exact", "similar"])
def test_dmrm_trajectories_learnt_as_one_batch_give_the_same_q_table(state_match):
    alone, batched = _bank(f"dmrm alone {state_match}"), _bank(f"dmrm batched {state_match}")
    for bank in (alone, batched):
        dmrm_settings_update(bank=bank, params={"state_match": state_match})
    items = [TrajectoryToLearn(_dmrm_trajectory("Where is my order W1?", reward), f"episode-{n}", run_ref="run 1",
                               episode_ref=f"episode-{n}")
             for n, reward in enumerate([1.0, 0.0, 1.0])]
    items.append(items[0])  # given twice: learnt from once

    expected = [experiences_from_trajectory(bank=alone, trajectory=i.trajectory, trajectory_id=i.trajectory_id,
                                            run_ref=i.run_ref, episode_ref=i.episode_ref) for i in items]
    written = experiences_from_trajectories(bank=batched, trajectories=items)

    assert written == {"episode-0": 2, "episode-1": 2, "episode-2": 2} and expected == [2, 2, 2, 0]
    assert _q_table(batched) == _q_table(alone)
    assert any(visits > 1 for _s, _a, _q, visits, *_ in _q_table(batched))  # later trajectories updated earlier entries
    assert _trajectories(batched) == _trajectories(alone)
    assert experiences_from_trajectories(bank=batched, trajectories=items) == {
        "episode-0": 0, "episode-1": 0, "episode-2": 0}
    assert _q_table(batched) == _q_table(alone)
