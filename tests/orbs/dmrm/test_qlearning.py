"""The Django-free DMRM formulas against values worked out by hand."""
import pytest

from orbs.dmrm.qlearning import (
    Choice,
    ExperienceView,
    action_choices,
    budget_fill,
    current_render,
    discounted_returns,
    experience_render,
    prompt_join,
    q_target,
    q_update,
    state_key,
)


def test_it_applies_the_q_update_formula():
    # Q' = 1 + 0.9·0.5 = 1.45; Q = 0.75·0.2 + 0.25·1.45 = 0.5125
    assert q_update(q=0.2, alpha=0.25, target=q_target(reward=1.0, gamma=0.9, next_max=0.5)) == pytest.approx(0.5125)
    assert q_target(reward=-1.0, gamma=0.9, next_max=None) == -1.0


def test_it_treats_states_equal_after_normalisation_only():
    assert state_key(goal="Return  the JACKET", observation=" order W7\n") == state_key(
        goal="return the jacket", observation="order w7")
    assert state_key(goal="return the jacket", observation="order W8") != state_key(
        goal="return the jacket", observation="order W7")


def test_it_discounts_returns_backwards():
    assert discounted_returns([0.0, 0.0, 1.0], gamma=0.5) == [0.25, 0.5, 1.0]


def words(text: str) -> int:
    return len(text.split())


def test_it_fills_the_budget_with_the_rendered_prompt_in_rank_order_and_closes_it():
    current = "current state " * 10  # 20 words
    blocks = ["one " * 30, "two " * 50, "three " * 10, "four " * 5]
    decisions = budget_fill(current=current, blocks=blocks, c_max=100, count=words)
    assert [d.included for d in decisions] == [True, True, False, False]
    assert decisions[1].used_after == words(prompt_join([current, *blocks[:2]])) == 100
    assert "would take 110 tokens > C_max 100" in decisions[2].reason and "closed" in decisions[3].reason
    too_long = budget_fill(current="word " * 101, blocks=["x"], c_max=100, count=words)
    assert not too_long[0].included and "alone takes 101 tokens" in too_long[0].reason


def test_it_counts_the_whole_prompt_not_a_sum_of_parts():
    """A tokenizer that charges for the gap between blocks: summing the parts would let 2 blocks in."""
    def with_gaps(text: str) -> int:
        return len(text.replace("\n\n", " GAP ").split())
    decisions = budget_fill(current="a b", blocks=["c d", "e f"], c_max=6, count=with_gaps)
    assert [d.included for d in decisions] == [True, False]


def test_it_picks_the_best_and_worst_valued_actions():
    encouraged, discouraged = action_choices([Choice("a", 0.2, "r1"), Choice("b", 0.9, "r2"), Choice("a", 0.4, "r3"),
                                              Choice("c", -0.5, "r4")])
    assert encouraged == Choice("b", 0.9, "r2") and discouraged == Choice("c", -0.5, "r4")
    assert action_choices([Choice("a", 0.2, "r1")]) == (Choice("a", 0.2, "r1"), None)


def test_it_never_breaks_value_ties_by_name():
    """Two actions at Q 0: the one seen more often is encouraged, and nothing is discouraged (an
    equal value is no reason to avoid it). Old code: alphabetical, and "b_succeeded" discouraged."""
    tied = [Choice("a_guess", 0.0, "once", visits=1), Choice("b_succeeded", 0.0, "often", visits=4)]
    assert action_choices(tied) == (tied[1], None)
    recent = [Choice("a_old", 0.5, "", visits=2, recency=1.0), Choice("z_new", 0.5, "", visits=2, recency=2.0)]
    assert action_choices(recent)[0].action == "z_new"
    same = [Choice("z_first", 0.5, ""), Choice("a_second", 0.5, "")]
    assert action_choices(same)[0].action == "z_first"  # full ties keep the retrieval order


def test_it_renders_each_experience_with_its_own_state_and_advice():
    current = current_render(recent_actions=[f"step{i}" for i in range(7)], observation="order delivered",
                             instruction="return the jacket")
    assert current.splitlines() == ["Recent actions: step2; step3; step4; step5; step6",
                                    "Observation: order delivered", "Instruction: return the jacket"]
    view = ExperienceView("Experience (target memory, similarity 0.91):", "order W7 delivered", "return a coat",
                          ["get_order", "return_item", "cancel_order"], Choice("return_item", 0.75, "reward 1"),
                          Choice("cancel_order", -0.5, "reward -1"))
    assert experience_render(view) == (
        "Experience (target memory, similarity 0.91):\nObservation: order W7 delivered\nInstruction: return a coat\n"
        "Actions taken: get_order; return_item; cancel_order\nEncouraged: return_item → 0.750 (reward 1)\n"
        "Discouraged: cancel_order → -0.500 (reward -1)")
