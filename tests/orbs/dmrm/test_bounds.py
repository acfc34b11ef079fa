"""DMRM's text bounds and token counts (issue 28): a long run of characters is counted as the
tokens it is, every text field is cut with a marker or refused by the API, no prompt block
exceeds C_max for adversarial text, and the source memory is switched off per domain."""
import base64
import json

import pytest

from memweb.embeddings import MAX_CHARS_PER_WORD, embedder
from orbs.dmrm.models import DMRMRetrievalLog, DMRMSettings, Experience
from orbs.dmrm.qlearning import GOAL_MAX_CHARS, OBSERVATION_MAX_CHARS
from orbs.dmrm.services import experience_append, experiences_from_trajectory, experiences_retrieve
from tests.orbs.conftest import post
from tests.orbs.dmrm.conftest import build_approved, shop_trajectory

API = "/api/orbs/experiences"
# 18,822 characters of letters and digits (URL-safe base64 without its -/_), once counted as 25 tokens.
BASE64_RUN = base64.b64encode(bytes(range(256)) * 56).decode().replace("+", "").replace("/", "")[:18822]
ADVERSARIAL = {
    "no spaces": "W" * 5000,
    "base64": BASE64_RUN,
    "CJK": "退货订单夹克尺码太小" * 300,
    "JSON": json.dumps({"order": {"items": [{"sku": f"J{i}", "qty": i} for i in range(400)]}}),
}


def test_a_run_of_characters_longer_than_a_word_is_counted_piece_by_piece():
    """WordPiece makes one [UNK] of a word over 100 characters: the run was counted as 1 token."""
    count = embedder().count_tokens(BASE64_RUN)
    assert count >= len(BASE64_RUN) // MAX_CHARS_PER_WORD * 2
    assert embedder().count_tokens("x" * 1000) > 10 and embedder().count_tokens("short words") == 2


@pytest.mark.parametrize("kind", sorted(ADVERSARIAL))
def test_no_prompt_block_exceeds_c_max_for_adversarial_text(dmrm, kind):
    text = ADVERSARIAL[kind]
    DMRMSettings.objects.filter(pk=dmrm.pk).update(c_max=600, min_similarity=-1.0)
    for i in range(3):
        trajectory = shop_trajectory(f"{kind}-{i}")
        trajectory["messages"][0]["content"] = f"{text} {i}"
        trajectory["messages"][2]["content"] = text
        trajectory["messages"][1]["tool_calls"][0]["arguments"] = {"order_id": text}
        experiences_from_trajectory(bank=dmrm.bank, trajectory=trajectory, trajectory_id=f"{kind}-{i}")
    stored = Experience.objects.filter(bank=dmrm.bank)
    assert all(len(e.goal) <= GOAL_MAX_CHARS and len(e.observation) <= OBSERVATION_MAX_CHARS for e in stored)
    result = experiences_retrieve(bank=dmrm.bank, goal=text, observation=text, recent_actions=[text] * 6)
    assert result.budget_used == embedder().count_tokens(result.prompt_block) <= 600
    assert len(result.prompt_block) < 600 * MAX_CHARS_PER_WORD  # the whole text never slips through


def test_a_two_megabyte_goal_is_cut_with_a_marker_and_never_fills_a_block(dmrm):
    huge = "A" * 2_000_000
    DMRMSettings.objects.filter(pk=dmrm.pk).update(c_max=8000, min_similarity=-1.0)
    experience_append(bank=dmrm.bank, trajectory_id="t", step=0, goal="return the jacket",
                      observation="order W7", action="get_order(W7)", reward=1.0, done=True, success=True)
    result = experiences_retrieve(bank=dmrm.bank, goal=huge, observation="order W7")
    assert "[cut: 2,000,000 characters]" in result.prompt_block and len(result.prompt_block) < 5000
    log = DMRMRetrievalLog.objects.get(pk=result.retrieval_id)
    assert len(log.goal) == GOAL_MAX_CHARS and log.goal.endswith("[cut: 2,000,000 characters]")


def test_the_api_refuses_an_over_long_field_naming_it_and_its_limit(agent, dmrm):
    step = {"trajectory_id": "t1", "step": 0, "goal": "g" * (GOAL_MAX_CHARS + 1), "observation": "o",
            "action": "a", "reward": 1.0}
    written = post(agent, f"{API}/banks/{dmrm.bank.slug}/transitions", {"transitions": [step]})
    assert written.status_code == 422
    problem = written.json()["detail"][0]
    assert problem["loc"][-1] == "goal" and str(GOAL_MAX_CHARS) in problem["msg"]
    asked = post(agent, f"{API}/banks/{dmrm.bank.slug}/retrieve",
                 {"goal": "g", "observation": "o" * (OBSERVATION_MAX_CHARS + 1)})
    assert asked.status_code == 422 and asked.json()["detail"][0]["loc"][-1] == "observation"
    assert not Experience.objects.exists() and not DMRMRetrievalLog.objects.exists()


def test_the_source_memory_is_switched_off_by_successes_of_the_task_domain_only(dmrm):
    build_approved(dmrm.bank)
    DMRMSettings.objects.filter(pk=dmrm.pk).update(min_similarity=-1.0)
    for name in ("a1", "a2"):
        experiences_from_trajectory(bank=dmrm.bank, trajectory=shop_trajectory(name, domain="appliances"),
                                    trajectory_id=name)
    state = {"goal": "I want to return the jacket from order W7", "observation": "Yes, return it please"}
    clothing = experiences_retrieve(bank=dmrm.bank, domain="clothing", **state)
    appliances = experiences_retrieve(bank=dmrm.bank, domain="appliances", **state)
    assert (clothing.suppressed, clothing.successful_trajectories) == (False, 0)
    assert any(h.memory == "source" for h in clothing.hits)
    assert (appliances.suppressed, appliances.successful_trajectories) == (True, 2)
    assert not any(h.memory == "source" for h in appliances.hits)
