"""The Django-free DMRM formulas against values worked out by hand."""
import pytest

from orbs.dmrm.qlearning import (
    Choice,
    action_choices,
    budget_select,
    discounted_returns,
    prompt_render,
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


def test_it_fills_the_budget_in_rank_order_and_closes_it():
    decisions = budget_select(lengths=[30, 50, 10, 5], query_tokens=20, c_max=100)
    assert [d.included for d in decisions] == [True, True, False, False]
    assert decisions[1].used_after == 100
    assert "would exceed C_max 100" in decisions[2].reason and "closed" in decisions[3].reason
    too_long = budget_select(lengths=[1], query_tokens=101, c_max=100)
    assert not too_long[0].included and "alone takes 101 tokens" in too_long[0].reason


def test_it_picks_the_best_and_worst_valued_actions():
    encouraged, discouraged = action_choices([("a", 0.2, "r1"), ("b", 0.9, "r2"), ("a", 0.4, "r3"), ("c", -0.5, "r4")])
    assert encouraged == Choice("b", 0.9, "r2") and discouraged == Choice("c", -0.5, "r4")
    assert action_choices([("a", 0.2, "r1")]) == (Choice("a", 0.2, "r1"), None)


def test_it_renders_the_papers_template():
    block = prompt_render(recent_actions=["search(jacket)", "open(W7)"], observation="order delivered",
                          instruction="return the jacket", encouraged=Choice("return_item", 0.75, "target memory"),
                          discouraged=Choice("cancel_order", -0.5, "x"))
    assert block == ("Recent actions: search(jacket); open(W7)\nObservation: order delivered\n"
                     "Instruction: return the jacket\nEncouraged: return_item → 0.750 (target memory)\n"
                     "Discouraged: cancel_order → -0.500")
