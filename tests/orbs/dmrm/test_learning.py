"""The target memory's Q-table: hand-computed updates on a small MDP, parallel updates, read-only sources."""
import threading

import pytest
from django.db import connection

from orbs.dmrm.models import DMRMSettings, Experience
from orbs.dmrm.services import SourceMemoryReadOnly, TransitionError, experience_append
from orbs.services import bank_get_or_create

GOAL = "return the jacket"


def step(bank, trajectory, n, obs, action, reward, nxt, **extra):
    return experience_append(bank=bank, trajectory_id=trajectory, step=n, goal=GOAL, observation=obs,
                             action=action, reward=reward, next_observation=nxt, **extra)


def q(bank, obs, action):
    return Experience.objects.get(bank=bank, observation=obs, action=action).q_value


def test_it_matches_hand_computed_q_values_on_a_small_mdp(dmrm):
    bank = dmrm.bank  # α = 0.5, γ = 0.9; s0 -a-> s1 -b-> s2 (r = 1), or s1 -c-> s3 (r = -1)
    step(bank, "t1", 0, "s0", "a", 0.0, "s1")                  # Q(s0,a) = 0.5·(0 + 0.9·0) = 0
    step(bank, "t1", 1, "s1", "b", 1.0, "s2", done=True, success=True)   # Q(s1,b) = 0.5·1 = 0.5
    assert q(bank, "s0", "a") == 0 and q(bank, "s1", "b") == pytest.approx(0.5)
    step(bank, "t2", 0, "S0 ", "a", 0.0, "s1")                 # same state after normalisation
    assert q(bank, "s0", "a") == pytest.approx(0.225)          # 0.5·0 + 0.5·(0.9·0.5)
    step(bank, "t2", 1, "s1", "b", 1.0, "s2", done=True, success=True)   # 0.5·0.5 + 0.5·1
    step(bank, "t3", 1, "s1", "c", -1.0, "s3", done=True, success=False)  # 0.5·(-1)
    step(bank, "t3", 0, "s0", "a", 0.0, "s1")                  # max_a Q(s1,·) = 0.75 -> 0.5·0.225 + 0.5·0.675
    assert q(bank, "s1", "b") == pytest.approx(0.75) and q(bank, "s1", "c") == pytest.approx(-0.5)
    assert q(bank, "s0", "a") == pytest.approx(0.45)
    assert Experience.objects.get(bank=bank, observation="s0").visits == 3
    assert Experience.objects.filter(bank=bank).count() == 3


def test_it_refuses_writes_to_the_source_memory_and_bad_steps(dmrm):
    with pytest.raises(SourceMemoryReadOnly):
        step(dmrm.bank, "t1", 0, "s0", "a", 1.0, "s1", memory="source")
    with pytest.raises(TransitionError) as refused:
        step(dmrm.bank, " ", 0, "s0", "", float("nan"), "s1")
    assert {f for f, _ in refused.value.problems} == {
        "transitions[0].trajectory_id", "transitions[0].action", "transitions[0].reward"}
    assert not Experience.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_it_counts_two_concurrent_updates_of_one_entry():
    bank = bank_get_or_create(name="parallel")
    DMRMSettings.objects.create(bank=bank, alpha=0.5, gamma=0.9)
    step(bank, "t0", 0, "s0", "a", 1.0, "end")  # the entry exists: both threads contend for its row lock
    barrier, errors = threading.Barrier(2), []

    def worker(name):
        try:
            barrier.wait()
            step(bank, name, 0, "s0", "a", 1.0, "end", done=True, success=True)
        except Exception as exc:  # reported by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(f"parallel-{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    entry = Experience.objects.get(bank=bank)
    assert entry.visits == 3
    assert entry.q_value == pytest.approx(0.875)  # 0.5 -> 0.75 -> 0.875: neither parallel update lost


@pytest.mark.parametrize(("state_match", "expected_q", "bootstraps"), [("exact", 0.0, 0), ("similar", 0.225, 1)])
def test_it_finds_the_successor_state_by_similarity_when_the_bank_says_so(client, reviewer_user, dmrm, state_match,
                                                                           expected_q, bootstraps):
    """An LLM customer rarely repeats a sentence word for word: with exact matching the first step
    never learns from the second (old code: always exact)."""
    DMRMSettings.objects.filter(pk=dmrm.pk).update(state_match=state_match, state_similarity=0.9)
    bank = dmrm.bank
    step(bank, "t1", 1, "The jacket from order W7 was delivered yesterday.", "return_item(W7)", 1.0, "",
         done=True, success=True)                                                    # Q = 0.5·1 = 0.5
    first = step(bank, "t2", 0, "hello, I need help", "get_order(W7)", 0.0,
                 "the jacket from order W7 was delivered yesterday!!")  # the same state, said differently
    assert first.q_value == pytest.approx(expected_q) and first.bootstraps == bootstraps  # 0.5·0.9·0.5
    client.force_login(reviewer_user)
    page = client.get("/orbs/experiences/", {"bank": bank.slug})
    assert page.context["updates"] == {"visits": 2, "bootstraps": bootstraps}
    assert f"{bootstraps} of 2 Q updates" in page.content.decode()


def test_a_finished_step_has_no_successor_even_by_similarity(dmrm):
    DMRMSettings.objects.filter(pk=dmrm.pk).update(state_match="similar", state_similarity=0.0)
    step(dmrm.bank, "t1", 0, "s0", "a", 1.0, "s1")
    last = step(dmrm.bank, "t1", 1, "s1", "b", 1.0, "", done=True, success=True)
    assert last.q_value == pytest.approx(0.5) and last.bootstraps == 0
