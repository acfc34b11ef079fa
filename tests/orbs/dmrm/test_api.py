"""The DMRM API: batches of transitions (all or nothing, 422 naming fields) and retrieval for a step."""
import json

import pytest

from memweb.models import ApiKey
from orbs.dmrm.models import DMRMRetrievalLog, Experience

API = "/api/orbs/experiences"
GOAL = "return the jacket from order W7"


@pytest.fixture
def agent(client, operator_user):
    _, secret = ApiKey.issue(user=operator_user, name="agent")
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {secret}"
    return client


def post(client, url, payload):
    return client.post(url, json.dumps(payload), content_type="application/json")


def transition(n, **overrides):
    return {"trajectory_id": "t1", "step": n, "goal": GOAL, "observation": f"s{n}", "action": f"a{n}",
            "reward": 0.0, "next_observation": f"s{n + 1}"} | overrides


def test_it_writes_a_batch_and_retrieves_a_prompt_block_with_trace(agent, dmrm):
    batch = [transition(0), transition(1, reward=1.0, done=True, success=True)]
    written = post(agent, f"{API}/banks/{dmrm.bank.slug}/transitions", {"transitions": batch})
    assert written.status_code == 201, written.content
    assert [e["q_value"] for e in written.json()["entries"]] == [0.0, 0.5]
    response = post(agent, f"{API}/banks/{dmrm.bank.slug}/retrieve",
                    {"goal": GOAL, "observation": "s1", "recent_actions": ["a0"], "client": "agent-1"})
    assert response.status_code == 200
    body = response.json()
    assert body["prompt_block"].startswith(
        f"Recent actions: a0\nObservation: s1\nInstruction: {GOAL}\nEncouraged: a1 → 0.500")
    assert {h["memory"] for h in body["trace"]} == {"target"} and all(h["reason"] for h in body["trace"])
    assert DMRMRetrievalLog.objects.get(pk=body["retrieval_id"]).client == "agent-1"


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
    assert source.status_code == 422 and "read-only" in source.json()["detail"]
    assert not Experience.objects.exists()


def test_it_refuses_anonymous_callers_and_unknown_banks(client, agent, dmrm):
    assert client.post(f"{API}/banks/{dmrm.bank.slug}/retrieve", "{}", content_type="text/plain",
                       HTTP_AUTHORIZATION="").status_code == 401
    assert post(agent, f"{API}/banks/nope/retrieve", {"goal": "g", "observation": "o"}).status_code == 404
