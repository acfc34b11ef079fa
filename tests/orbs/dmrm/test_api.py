"""The DMRM API: batches of transitions (all or nothing, 422 naming fields) and retrieval for a step."""
import json

import pytest

from orbs.dmrm.models import DMRMRetrievalLog, DMRMSettings, Experience
from tests.orbs.conftest import post

API = "/api/orbs/experiences"
GOAL = "return the jacket from order W7"


def transition(n, **overrides):
    return {"trajectory_id": "t1", "step": n, "goal": GOAL, "observation": f"s{n}", "action": f"a{n}",
            "reward": 0.0, "next_observation": f"s{n + 1}"} | overrides


def test_it_writes_a_batch_and_retrieves_a_prompt_block_with_trace(agent, dmrm):
    DMRMSettings.objects.filter(pk=dmrm.pk).update(review_api_writes=False)  # the gate: test_review_gate.py
    batch = [transition(0), transition(1, reward=1.0, done=True, success=True)]
    written = post(agent, f"{API}/banks/{dmrm.bank.slug}/transitions", {"transitions": batch})
    assert written.status_code == 201, written.content
    # Applied last step first: Q(s1,a1) = 0.5·1 = 0.5, then Q(s0,a0) = 0.5·(0 + 0.9·0.5) = 0.225.
    assert [e["q_value"] for e in written.json()["entries"]] == [pytest.approx(0.225), 0.5]
    response = post(agent, f"{API}/banks/{dmrm.bank.slug}/retrieve",
                    {"goal": GOAL, "observation": "s1", "recent_actions": ["a0"], "client": "agent-1"})
    assert response.status_code == 200
    body = response.json()
    assert body["prompt_block"].startswith(f"Recent actions: a0\nObservation: s1\nInstruction: {GOAL}\n\nExperience")
    assert "Observation: s1\nInstruction: " + GOAL + "\nActions taken: a1\nEncouraged: a1 → 0.500" in body["prompt_block"]
    assert {h["memory"] for h in body["trace"]} == {"target"} and all(h["reason"] for h in body["trace"])
    assert body["min_similarity"] == dmrm.min_similarity and all(not h["withheld"] for h in body["trace"])
    assert DMRMRetrievalLog.objects.get(pk=body["retrieval_id"]).client == "agent-1"


def test_the_order_steps_are_posted_in_does_not_change_the_q_values(agent, dmrm):
    """Old code applied a batch in posted order: forwards, step 0 saw no successor yet (Q 0)."""
    url = f"{API}/banks/{dmrm.bank.slug}/transitions"
    steps = [transition(n, trajectory_id=name, reward=1.0 if n == 2 else 0.0, done=n == 2, success=True)
             for name in ("forward", "backward") for n in range(3)]
    q_values = {}
    for name, order in (("forward", steps[:3]), ("backward", steps[3:][::-1])):
        Experience.objects.filter(bank=dmrm.bank).delete()  # both trajectories meet the same states
        entries = post(agent, url, {"transitions": order}).json()["entries"]
        q_values[name] = sorted((e["step"], e["q_value"]) for e in entries)
    assert q_values["forward"] == q_values["backward"]
    assert [q for _, q in q_values["forward"]] == [pytest.approx(0.10125), pytest.approx(0.225), 0.5]


def test_a_retried_step_changes_nothing(agent, dmrm):
    """Old code added a visit and moved Q again for every repost, and twice for a step repeated in a batch."""
    url = f"{API}/banks/{dmrm.bank.slug}/transitions"
    batch = [transition(0), transition(1, reward=1.0, done=True, success=True)]
    first = post(agent, url, {"transitions": batch}).json()["entries"]
    again = post(agent, url, {"transitions": batch}).json()["entries"]  # the client retried after a timeout
    assert [(e["id"], e["q_value"], e["visits"]) for e in again] == [(e["id"], e["q_value"], e["visits"]) for e in first]
    repeated = post(agent, url, {"transitions": [transition(0, trajectory_id="t2")] * 2}).json()["entries"]
    assert repeated[0] == repeated[1] and repeated[0]["visits"] == first[0]["visits"] + 1
    rows = {(e.action, e.visits) for e in Experience.objects.filter(bank=dmrm.bank)}
    assert rows == {("a0", 2), ("a1", 1)}
    assert dmrm.bank.experience_trajectories.get(trajectory_id="t1").steps == 2


def test_it_names_each_bad_field_and_writes_nothing(agent, dmrm):
    url = f"{API}/banks/{dmrm.bank.slug}/transitions"
    response = post(agent, url, {"transitions": [transition(0), transition(1, reward="lots", step=-1)]})
    assert response.status_code == 422
    locations = {tuple(e["loc"][-3:]) for e in response.json()["detail"]}
    assert {("transitions", 1, "reward"), ("transitions", 1, "step")} <= locations
    blank = post(agent, url, {"transitions": [transition(0), transition(1, trajectory_id="  ")]})
    assert blank.status_code == 422
    assert blank.json()["detail"][0]["loc"][-2:] == [1, "trajectory_id"]
    source = post(agent, url, {"transitions": [transition(0, memory="source")]})
    assert source.status_code == 422 and "read-only" in source.json()["detail"][0]["msg"]
    assert not Experience.objects.exists()


def test_it_refuses_anonymous_callers_and_unknown_banks(client, agent, dmrm):
    assert client.post(f"{API}/banks/{dmrm.bank.slug}/retrieve", "{}", content_type="text/plain",
                       HTTP_AUTHORIZATION="").status_code == 401
    assert post(agent, f"{API}/banks/nope/retrieve", {"goal": "g", "observation": "o"}).status_code == 404


# --- settings, experiences, stats ------------------------------------------------------------------

def put(client, url, payload):
    return client.put(url, json.dumps(payload), content_type="application/json")


def test_an_operator_reads_and_sets_the_bank_settings(agent, dmrm):
    """Old code had no settings route: a program could not read or change α, C_max or the suppression mode."""
    url = f"{API}/banks/{dmrm.bank.slug}/settings"
    read = agent.get(url).json()
    assert (read["alpha"], read["c_max"], read["suppression_mode"]) == (0.5, 400, "disable")
    changed = put(agent, url, {"alpha": 0.25, "c_max": 900, "suppression_mode": "down_weight"})
    assert changed.status_code == 200, changed.content
    assert changed.json()["alpha"] == 0.25 and changed.json()["gamma"] == 0.9  # left out: kept
    dmrm.refresh_from_db()
    assert (dmrm.alpha, dmrm.c_max, dmrm.suppression_mode) == (0.25, 900, "down_weight")


def test_bad_settings_are_a_422_naming_each_field_and_change_nothing(agent, dmrm):
    url = f"{API}/banks/{dmrm.bank.slug}/settings"
    response = put(agent, url, {"alpha": 0.1, "c_max": 9, "state_match": "fuzzy"})
    assert response.status_code == 422
    assert {tuple(e["loc"]) for e in response.json()["detail"]} == {
        ("body", "payload", "c_max"), ("body", "payload", "state_match")}
    assert put(agent, url, {"gamma": "0.5"}).status_code == 422  # a string is not a number
    assert put(agent, url, {"bank": 3}).status_code == 422
    dmrm.refresh_from_db()
    assert (dmrm.alpha, dmrm.c_max, dmrm.state_match) == (0.5, 400, "exact")


def test_reviewers_read_the_settings_but_only_operators_set_them(client, reviewer_user, dmrm):
    client.force_login(reviewer_user)
    url = f"{API}/banks/{dmrm.bank.slug}/settings"
    assert client.get(url).status_code == 200
    assert put(client, url, {"alpha": 0.1}).status_code == 403
    assert client.get(f"{API}/banks/nope/settings").status_code == 404


@pytest.fixture
def both_memories(agent, dmrm):
    """Two target entries (one flagged) and the source memory of one episode."""
    from tests.orbs.dmrm.conftest import build_approved

    post(agent, f"{API}/banks/{dmrm.bank.slug}/transitions",
         {"transitions": [transition(0), transition(1, reward=1.0, done=True, success=True)]})
    Experience.objects.filter(bank=dmrm.bank, action="a1").update(flagged_at="2026-01-01T00:00:00Z")
    build_approved(dmrm.bank)
    return dmrm.bank


def test_it_lists_experiences_by_filter_a_page_at_a_time(agent, both_memories):
    """Old code had no listing route: experiences could be read only on the browser page."""
    url = f"{API}/banks/{both_memories.slug}/experiences"
    every = agent.get(url).json()
    sources = Experience.objects.filter(bank=both_memories, memory="source").count()
    assert every["count"] == 2 + sources and sources > 0
    target = agent.get(url, {"memory": "target"}).json()["items"]
    assert sorted(e["action"] for e in target) == ["a0", "a1"] and {e["source_memory"] for e in target} == {None}
    source = agent.get(url, {"source_memory": "clothing", "status": "approved"}).json()
    assert source["count"] == sources and {e["memory"] for e in source["items"]} == {"source"}
    assert [e["action"] for e in agent.get(url, {"flagged": True}).json()["items"]] == ["a1"]
    assert [e["action"] for e in agent.get(url, {"q": "A0"}).json()["items"]] == ["a0"]
    assert agent.get(url, {"page": 2}).json() == {"items": [], "count": every["count"]}  # 50 a page
    assert agent.get(url, {"memory": "both"}).status_code == 422


def test_it_shows_one_experience_of_the_bank(agent, both_memories):
    entry = Experience.objects.get(bank=both_memories, action="a1")
    url = f"{API}/banks/{both_memories.slug}/experiences"
    shown = agent.get(f"{url}/{entry.pk}").json()
    assert (shown["q_value"], shown["visits"], shown["trajectory_id"], shown["flagged_at"] is not None) == (
        0.5, 1, "t1", True)
    assert agent.get(f"{url}/{entry.pk + 10_000}").status_code == 404
    assert agent.get(f"{API}/banks/nope/experiences").status_code == 404


def test_bank_stats_count_the_dmrm_memory(agent, both_memories):
    """Old code's stats counted Orbs only."""
    stats = agent.get(f"/api/orbs/banks/{both_memories.slug}/stats").json()["dmrm"]
    sources = Experience.objects.filter(bank=both_memories, memory="source").count()
    assert stats == {"target_experiences": 2, "source_experiences": sources, "flagged_experiences": 1,
                     "trajectories": 1, "successful_trajectories": 1, "source_memories": 1}
