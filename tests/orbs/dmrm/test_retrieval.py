"""DMRM retrieval: the budget rule, adaptive source suppression, rendering, and the log."""
import pytest

from memweb.embeddings import embedder
from orbs.dmrm.models import DMRMRetrievalLog, DMRMSettings, Experience
from orbs.dmrm.services import experience_append, experiences_retrieve
from tests.orbs.dmrm.conftest import build_approved

GOAL = "I want to return the jacket from order W7"
SITUATIONS = ["order W7 delivered, jacket too small", "customer asks for a refund of the jacket",
              "the weather is sunny today", "order W9 contains shoes", "jacket return window is open"]


def trajectory(bank, name, *, success):
    experience_append(bank=bank, trajectory_id=name, step=0, goal=GOAL, observation=f"{name} look-up",
                      action="get_order(W7)", reward=0.0, next_observation=f"{name} result")
    experience_append(bank=bank, trajectory_id=name, step=1, goal=GOAL, observation=f"{name} result",
                      action="return_item(W7)", reward=1.0 if success else 0.0, done=True, success=success)


def test_it_fills_c_max_with_the_best_ranked_entries_first(dmrm):
    for i, text in enumerate(SITUATIONS):
        experience_append(bank=dmrm.bank, trajectory_id=f"t{i}", step=0, goal=GOAL, observation=text,
                          action=f"action_{i}", reward=1.0)
    query_tokens = embedder().count_tokens(f"order W7 delivered\n{GOAL}")
    lengths = sorted(Experience.objects.values_list("token_length", flat=True))
    DMRMSettings.objects.filter(pk=dmrm.pk).update(c_max=query_tokens + lengths[0] + lengths[1])
    result = experiences_retrieve(bank=dmrm.bank, goal=GOAL, observation="order W7 delivered")
    included = [h for h in result.hits if h.included]
    assert 1 <= len(included) < len(result.hits)
    assert query_tokens + sum(h.experience.token_length for h in included) == result.budget_used <= result.c_max
    assert [h.included for h in result.hits] == [True] * len(included) + [False] * (len(result.hits) - len(included))
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)
    assert included[0].experience.observation == SITUATIONS[0]
    log = DMRMRetrievalLog.objects.get(pk=result.retrieval_id)
    assert log.budget_used == result.budget_used and len(log.hits) == len(result.hits)
    assert all(hit["reason"] for hit in log.hits)


def _source_hits(result):
    return [h for h in result.hits if h.memory == Experience.Memory.SOURCE]


def test_it_disables_the_source_memory_exactly_at_the_nth_success(dmrm):
    build_approved(dmrm.bank)
    ask = {"bank": dmrm.bank, "goal": GOAL, "observation": "look-up"}
    trajectory(dmrm.bank, "a", success=True)
    trajectory(dmrm.bank, "b", success=False)
    before = experiences_retrieve(**ask)
    assert not before.suppressed and before.successful_trajectories == 1 and _source_hits(before)
    trajectory(dmrm.bank, "c", success=True)
    after = experiences_retrieve(**ask)
    assert after.suppressed and after.successful_trajectories == 2 and not _source_hits(after)


def test_it_down_weights_source_scores_when_set_to(dmrm):
    DMRMSettings.objects.filter(pk=dmrm.pk).update(suppression_mode="down_weight", source_weight=0.5, n_success=1)
    build_approved(dmrm.bank)
    trajectory(dmrm.bank, "a", success=True)
    hits = _source_hits(experiences_retrieve(bank=dmrm.bank, goal=GOAL, observation="look-up"))
    assert hits and all(h.score == pytest.approx(h.raw_score * 0.5) for h in hits)
    assert all("down-weighted" in h.reason for h in hits)


def test_it_renders_encouraged_and_discouraged_actions(dmrm):
    experience_append(bank=dmrm.bank, trajectory_id="t1", step=0, goal=GOAL, observation="order delivered",
                      action="return_item(W7)", reward=1.0)
    experience_append(bank=dmrm.bank, trajectory_id="t2", step=0, goal=GOAL, observation="order delivered",
                      action="cancel_order(W7)", reward=-1.0)
    block = experiences_retrieve(bank=dmrm.bank, goal=GOAL, observation="order delivered",
                                 recent_actions=["get_order(W7)"]).prompt_block
    lines = block.splitlines()
    assert lines[:3] == ["Recent actions: get_order(W7)", "Observation: order delivered", f"Instruction: {GOAL}"]
    assert lines[3].startswith("Encouraged: return_item(W7) → 0.500 (target memory, similarity")
    assert lines[4] == "Discouraged: cancel_order(W7) → -0.500"
