"""DMRM's review gate (issue 30): what an API key writes waits for a reviewer, as a key's Orbs do, while
a run's own writes serve it at once; only a reviewer sets the gate; every text of a transition is
bounded, and the customer key travels with the steps so that erasing a customer removes them."""
import json

import pytest
from django.urls import reverse

from orbs.dmrm.models import DMRMSettings, Experience, ExperienceStep, ExperienceTrajectory
from orbs.dmrm.services import TransitionError, experience_append, experience_review, experiences_from_trajectory
from orbs.services.erasure import customer_erase
from tests.orbs.conftest import post
from tests.orbs.dmrm.conftest import build_approved, shop_trajectory

API = "/api/orbs/experiences"
GOAL = "I want to return the jacket from order W7"


def steps(trajectory_id: str, **overrides) -> list[dict]:
    return [{"trajectory_id": trajectory_id, "step": 0, "goal": GOAL, "observation": "order W7 delivered",
             "action": "return_item(W7)", "reward": 0.0, "done": True, "success": False} | overrides]


def retrieve(agent, slug: str) -> dict:
    asked = post(agent, f"{API}/banks/{slug}/retrieve", {"goal": GOAL, "observation": "order W7 delivered"})
    assert asked.status_code == 200, asked.content
    return asked.json()


def test_api_written_experiences_wait_for_approval_and_a_runs_own_serve_at_once(agent, reviewer_user, dmrm):
    DMRMSettings.objects.filter(pk=dmrm.pk).update(min_similarity=-1.0)
    slug = dmrm.bank.slug
    assert agent.get(f"{API}/banks/{slug}/settings").json()["review_api_writes"] is True
    written = post(agent, f"{API}/banks/{slug}/transitions", {"transitions": steps("api-1", customer_key="c9")})
    assert written.status_code == 201, written.content
    entry = Experience.objects.get(pk=written.json()["entries"][0]["id"])
    assert (entry.status, entry.needs_review, entry.customer_key) == ("pending", True, "c9")
    assert retrieve(agent, slug)["trace"] == []

    experience_review(experience_id=entry.pk, expected_version=entry.version, status="approved", actor=reviewer_user)
    assert [hit["experience_id"] for hit in retrieve(agent, slug)["trace"]] == [entry.pk]

    # A run learns from its own target memory as it goes: nothing of it waits (docs/DMRM.md).
    experiences_from_trajectory(bank=dmrm.bank, trajectory=shop_trajectory("run-1"), trajectory_id="run-1")
    from_run = Experience.objects.filter(trajectory_id="run-1")
    assert from_run.count() == 2 and not any(e.needs_review for e in from_run)
    assert {e.customer_key for e in from_run} == {"c1"}
    assert set(ExperienceStep.objects.filter(trajectory_id="run-1").values_list("customer_key", flat=True)) == {"c1"}
    assert ExperienceTrajectory.objects.get(trajectory_id="run-1").customer_key == "c1"


def test_erasing_a_customer_removes_the_entries_their_steps_wrote_or_updated(agent, operator_user, dmrm):
    build_approved(dmrm.bank)  # from an episode of customer c1
    experiences_from_trajectory(bank=dmrm.bank, trajectory=shop_trajectory("run-1"), trajectory_id="run-1")
    # c2 meets c1's first (state, action): the shared entry learnt from both.
    shared = steps("api-3", goal="I want to return the jacket from order W7", customer_key="c2")[0]
    first = Experience.objects.get(memory="target", trajectory_id="run-1", step=0)
    shared |= {"observation": first.observation, "action": first.action}
    post(agent, f"{API}/banks/{dmrm.bank.slug}/transitions", {"transitions": [shared, *steps("api-4", customer_key="c3")]})
    assert Experience.objects.get(pk=first.pk).visits == 2

    record = customer_erase(bank=dmrm.bank, customer_key="c2", actor=operator_user)
    assert record.counts["experiences"] == 1 and not Experience.objects.filter(pk=first.pk).exists()
    customer_erase(bank=dmrm.bank, customer_key="c1", actor=operator_user)
    assert list(Experience.objects.values_list("customer_key", flat=True)) == ["c3"]
    assert not ExperienceStep.objects.exclude(customer_key="c3").exists()
    assert list(ExperienceTrajectory.objects.values_list("customer_key", flat=True)) == ["c3"]


def test_with_the_gate_off_api_writes_are_served_at_once(agent, dmrm):
    DMRMSettings.objects.filter(pk=dmrm.pk).update(min_similarity=-1.0, review_api_writes=False)
    written = post(agent, f"{API}/banks/{dmrm.bank.slug}/transitions", {"transitions": steps("api-2")})
    assert written.status_code == 201, written.content
    assert len(retrieve(agent, dmrm.bank.slug)["trace"]) == 1


def test_only_a_reviewer_sets_the_gate(client, agent, operator_user, reviewer_user, dmrm):
    slug = dmrm.bank.slug
    refused = agent.put(f"{API}/banks/{slug}/settings", json.dumps({"review_api_writes": False}),
                        content_type="application/json")
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"][-1] == "review_api_writes"
    form = {"alpha": 0.4, "gamma": 0.9, "c_max": 400, "n_success": 2, "suppression_mode": "disable",
            "source_weight": 0.5, "scan_limit": 50, "min_similarity": 0.3, "state_match": "exact",
            "state_similarity": 0.9}
    client.force_login(operator_user)
    assert client.post(reverse("orbs:dmrm_settings_save", args=[slug]), form).status_code == 302
    dmrm.refresh_from_db()
    assert (dmrm.alpha, dmrm.review_api_writes) == (0.4, True)  # the unticked box is not the operator's
    client.force_login(reviewer_user)
    assert client.post(reverse("orbs:dmrm_settings_save", args=[slug]), {"alpha": 0.1}).status_code == 302
    dmrm.refresh_from_db()
    assert (dmrm.alpha, dmrm.review_api_writes) == (0.4, False)


@pytest.mark.parametrize("field, value", [("customer_key", "k" * 201), ("task_ref", "t" * 201),
                                          ("domain", "d" * 65), ("episode_ref", "e" * 201)])
def test_every_text_of_a_transition_is_bounded_naming_the_field(agent, dmrm, field, value):
    refused = post(agent, f"{API}/banks/{dmrm.bank.slug}/transitions", {"transitions": steps("b", **{field: value})})
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"][-1] == field
    with pytest.raises(TransitionError, match=rf"transitions\[0\]\.{field}: {len(value)} characters"):
        experience_append(bank=dmrm.bank, trajectory_id="b", step=0, goal=GOAL, observation="o", action="a",
                          reward=0.0, **{field: value})
    assert not Experience.objects.exists()


def test_a_retrieval_refuses_a_history_longer_than_it_reads(agent, dmrm):
    asked = post(agent, f"{API}/banks/{dmrm.bank.slug}/retrieve",
                 {"goal": GOAL, "observation": "o", "recent_actions": ["a"] * 51})
    assert asked.status_code == 422 and asked.json()["detail"][0]["loc"][-1] == "recent_actions"
