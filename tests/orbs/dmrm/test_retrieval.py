"""DMRM retrieval: the budget rule, adaptive source suppression, rendering, and the log."""
import hypothesis
import pytest
from hypothesis import strategies as st

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


def _situations(bank):
    for i, text in enumerate(SITUATIONS):
        experience_append(bank=bank, trajectory_id=f"t{i}", step=0, goal=GOAL, observation=text,
                          action=f"action_{i}", reward=1.0)


def test_it_fills_c_max_with_the_best_ranked_experiences_first(dmrm):
    _situations(dmrm.bank)
    DMRMSettings.objects.filter(pk=dmrm.pk).update(min_similarity=-1.0)
    wide = experiences_retrieve(bank=dmrm.bank, goal=GOAL, observation="order W7 delivered")
    assert all(h.included for h in wide.hits) and wide.budget_used == embedder().count_tokens(wide.prompt_block)
    two = wide.prompt_block.split("\n\nExperience")[:3]  # the current state and the first two experiences
    DMRMSettings.objects.filter(pk=dmrm.pk).update(c_max=embedder().count_tokens("\n\nExperience".join(two)))
    result = experiences_retrieve(bank=dmrm.bank, goal=GOAL, observation="order W7 delivered")
    assert [h.included for h in result.hits] == [True, True] + [False] * (len(result.hits) - 2)
    assert result.budget_used == embedder().count_tokens(result.prompt_block) <= result.c_max
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)
    assert result.hits[0].experience.observation == SITUATIONS[0] and "budget closed" in result.hits[2].reason
    log = DMRMRetrievalLog.objects.get(pk=result.retrieval_id)
    assert log.budget_used == result.budget_used and len(log.hits) == len(result.hits)
    assert all(hit["reason"] for hit in log.hits) and [h["block"] for h in log.hits[:2]] == [1, 2]


@pytest.fixture
def situations(dmrm):
    _situations(dmrm.bank)
    experience_append(bank=dmrm.bank, trajectory_id="t0b", step=0, goal=GOAL, observation=SITUATIONS[0],
                      action="cancel_order(W7)", reward=-1.0)  # a second action in the first state
    DMRMSettings.objects.filter(pk=dmrm.pk).update(min_similarity=-1.0)
    return dmrm


@hypothesis.settings(max_examples=12, deadline=None, database=None,
                     suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(c_max=st.integers(min_value=16, max_value=400), history=st.integers(min_value=0, max_value=9),
                  observation=st.sampled_from(SITUATIONS + ["jacket", "order W7 " * 40]))
def test_the_prompt_never_exceeds_c_max_and_holds_every_included_experience(situations, c_max, history, observation):
    DMRMSettings.objects.filter(pk=situations.pk).update(c_max=c_max)
    result = experiences_retrieve(bank=situations.bank, goal=GOAL, observation=observation,
                                  recent_actions=[f"tool_{i}()" for i in range(history)])
    block = result.prompt_block
    assert embedder().count_tokens(block) == result.budget_used <= c_max
    included = [h for h in result.hits if h.included]
    assert block.count("\nActions taken: ") == len({h.block for h in included})
    for hit in included:
        experience = block.split("\n\n")[hit.block]  # the current state comes first
        assert f"Observation: {hit.experience.observation}\n" in experience and hit.experience.action in experience
    last_five = "; ".join(f"tool_{i}()" for i in range(max(0, history - 5), history)) or "(none)"
    assert not included or block.startswith(f"Recent actions: {last_five}\n")


def test_it_keeps_entries_below_the_minimum_similarity_out(dmrm):
    _situations(dmrm.bank)
    experience_append(bank=dmrm.bank, trajectory_id="gym", step=0, goal="cancel my gym membership",
                      observation="the weather is sunny today", action="tell_weather()", reward=1.0)
    ask = {"bank": dmrm.bank, "goal": GOAL, "observation": "order W7 delivered, jacket too small"}
    DMRMSettings.objects.filter(pk=dmrm.pk).update(min_similarity=0.0, c_max=2000)
    paper = experiences_retrieve(**ask)  # the paper: every candidate that fits the budget
    unrelated = next(h for h in paper.hits if h.experience.action == "tell_weather()")
    assert unrelated.included and unrelated.raw_score < 0.3 and "tell_weather()" in paper.prompt_block
    DMRMSettings.objects.filter(pk=dmrm.pk).update(min_similarity=0.3)
    floored = experiences_retrieve(**ask)
    unrelated = next(h for h in floored.hits if h.experience.action == "tell_weather()")
    assert not unrelated.included and "below the bank's minimum 0.3" in unrelated.reason
    assert "tell_weather()" not in floored.prompt_block and any(h.included for h in floored.hits)
    assert DMRMRetrievalLog.objects.get(pk=floored.retrieval_id).min_similarity == 0.3


def test_it_logs_withheld_experiences_and_keeps_them_out_of_the_prompt(situations):
    first = Experience.objects.get(observation=SITUATIONS[0], action="action_0")
    result = experiences_retrieve(bank=situations.bank, goal=GOAL, observation=SITUATIONS[0],
                                  withhold=lambda pk: pk == first.pk)
    withheld = next(h for h in result.hits if h.experience.pk == first.pk)
    assert withheld.withheld and not withheld.included and "withheld" in withheld.reason
    assert "action_0" not in result.prompt_block and "cancel_order(W7)" in result.prompt_block
    trace = DMRMRetrievalLog.objects.get(pk=result.retrieval_id).hits
    assert [h["withheld"] for h in trace if h["experience_id"] == first.pk] == [True]


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


def test_it_renders_each_experience_with_its_own_advice(dmrm):
    experience_append(bank=dmrm.bank, trajectory_id="t1", step=0, goal=GOAL, observation="order delivered",
                      action="return_item(W7)", reward=1.0)
    experience_append(bank=dmrm.bank, trajectory_id="t2", step=0, goal=GOAL, observation="order delivered",
                      action="cancel_order(W7)", reward=-1.0)
    experience_append(bank=dmrm.bank, trajectory_id="t3", step=0, goal=GOAL, observation="order delivered late",
                      action="refund(W7)", reward=0.0)
    block = experiences_retrieve(bank=dmrm.bank, goal=GOAL, observation="order delivered",
                                 recent_actions=["get_order(W7)"]).prompt_block
    current, first, second = block.split("\n\n")
    assert current.splitlines() == ["Recent actions: get_order(W7)", "Observation: order delivered",
                                    f"Instruction: {GOAL}"]
    lines = first.splitlines()
    assert lines[0].startswith("Experience (target memory, similarity 1.00")
    assert lines[1:4] == ["Observation: order delivered", f"Instruction: {GOAL}",
                          "Actions taken: return_item(W7); cancel_order(W7)"]
    assert lines[4] == "Encouraged: return_item(W7) → 0.500 (reward 1, seen 1×, from an unfinished trajectory)"
    assert lines[5] == "Discouraged: cancel_order(W7) → -0.500 (reward -1, seen 1×, from an unfinished trajectory)"
    assert "Observation: order delivered late" in second and "Encouraged: refund(W7) → 0.000" in second
    assert "Discouraged" not in second  # one action: nothing to avoid
