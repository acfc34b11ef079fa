"""The prompt budget holds the paper's top-k: LLM-length reflections all reach the prompt by default,
and a bank whose budget cuts k says so on its page."""
import json

from django.urls import reverse

from memweb.embeddings import embedder
from orbs.budget import DEFAULT_K, REFLECTION_MAX_TOKENS, REFLECTION_MAX_WORDS, prompt_budget_for
from orbs.services import bank_get_or_create, orbs_retrieve
from tests.fakes.openai_server import json_reply
from tests.orbs.conftest import success_trajectory

_LESSON = ("Outcome: not resolved; the agent called `cancel_pending_order` with order_id W2378156 for a delivered "
           "order instead of `return_delivered_order_items`, and the customer grew frustrated. ")
_PLAN = "New plan: look up the order with `get_order_details`, read its status, then return the delivered items."


def _llm_length_reflection() -> str:
    """A reflection as long as the reflector is asked to write."""
    words = (_LESSON * 20).split()[: REFLECTION_MAX_WORDS - len(_PLAN.split())]
    return " ".join([*words, *_PLAN.split()])


def _reflector_answer(request: dict):
    """The reflector role also tags the customer's emotion; each call gets the answer its schema asks for."""
    if "reflection" in json.dumps(request.get("response_format", {})):
        return json_reply({"reflection": _llm_length_reflection()})
    return json_reply({"label": "frustrated"})


def _llm_orbs(fake_llm, bank, count: int) -> None:
    from orbs.services import orb_from_episode

    fake_llm.use_for("reflector")  # near-duplicates wait for review: the banks serve pending Orbs
    fake_llm.set_default(_reflector_answer)
    for n in range(count):
        orb_from_episode(bank=bank, trajectory=success_trajectory(f"My blender number {n} arrived broken."))


def test_it_injects_all_k_llm_length_orbs_with_the_default_budget(fake_llm, db):
    bank = bank_get_or_create(name="k fits", approved_only=False)
    _llm_orbs(fake_llm, bank, DEFAULT_K)
    longest = max(embedder().count_tokens(orb.outcome) for orb in bank.orbs.all())
    assert longest > REFLECTION_MAX_TOKENS - 40  # as long as the reflector may write (the old budget held two)
    result = orbs_retrieve(bank=bank, query="blender arrived broken", context={}, approved_only=False)
    assert len(result.hits) == DEFAULT_K
    assert result.injected_count == DEFAULT_K
    assert all(f"[{rank}]" in result.prompt_block for rank in range(1, DEFAULT_K + 1))


def test_a_fresh_bank_gets_the_budget_of_its_own_k(db):
    assert bank_get_or_create(name="k ten", retrieval_k=10).prompt_token_budget == prompt_budget_for(10)
    assert bank_get_or_create(name="chosen", retrieval_k=10, prompt_token_budget=300).prompt_token_budget == 300


def test_an_api_agent_learns_how_many_hits_reached_the_prompt(fake_llm, client, operator_user):
    from memweb.models import ApiKey

    bank = bank_get_or_create(name="api cut", approved_only=False, prompt_token_budget=600)
    _llm_orbs(fake_llm, bank, DEFAULT_K)
    _, secret = ApiKey.issue(user=operator_user, name="agent")
    body = client.post(f"/api/orbs/banks/{bank.slug}/retrieve", json.dumps({"query": "blender broken", "approved_only": False}),
                       content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}").json()
    assert len(body["hits"]) == DEFAULT_K and 0 < body["injected"] < DEFAULT_K
    assert [hit["injected"] for hit in body["hits"]] == [n < body["injected"] for n in range(DEFAULT_K)]


def test_the_bank_page_warns_when_the_budget_cuts_k(fake_llm, client, operator_user):
    bank = bank_get_or_create(name="cut", approved_only=False, prompt_token_budget=600)
    _llm_orbs(fake_llm, bank, DEFAULT_K)
    result = orbs_retrieve(bank=bank, query="blender arrived broken", context={}, approved_only=False)
    assert result.injected_count < len(result.hits) == DEFAULT_K
    client.force_login(operator_user)
    page = client.get(reverse("orbs:bank_detail", args=[bank.slug])).content.decode()
    cut = DEFAULT_K - result.injected_count
    assert "may cut k: it surely holds 1 of the 5 Orbs" in page
    assert f"kept {cut} retrieved Orb{'s' if cut > 1 else ''} out of the prompt" in page
    roomy = bank_get_or_create(name="roomy")
    assert 'id="budget-cut"' not in client.get(reverse("orbs:bank_detail", args=[roomy.slug])).content.decode()
