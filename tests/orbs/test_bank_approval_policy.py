"""A bank's approval policy (approved_only, auto_approve, auto_approve_min_reward) is the review gate:
an API key cannot set it (403 saying why), nor can an operator who does not review; a reviewer's (or
admin's) session can. A key's bank gets the default policy, so what the key remembers waits for review."""
import pytest
from django.urls import reverse

from orbs.models import MemoryBank
from tests.orbs.conftest import post

API = "/api/orbs"
FORM = {"retrieval_k": 5, "min_score": 0, "near_duplicate_threshold": 0.95, "auto_approve_min_reward": 1,
        "prompt_token_budget": 600, "approved_only": "on"}


@pytest.mark.parametrize("policy", [{"auto_approve": "always"}, {"approved_only": False},
                                    {"auto_approve": "by_rule", "auto_approve_min_reward": -5}])
def test_a_key_cannot_choose_a_banks_approval_policy(agent, policy):
    refused = post(agent, f"{API}/banks", {"name": "Keys bank", **policy})
    assert refused.status_code == 403, refused.content
    detail = refused.json()["detail"]
    assert detail.startswith("an API key cannot set a bank's approval policy") and all(name in detail for name in policy)
    assert not MemoryBank.objects.filter(name="Keys bank").exists()


def test_a_keys_bank_gets_the_default_policy_and_its_lessons_wait_for_review(agent):
    created = post(agent, f"{API}/banks", {"name": "Keys bank", "auto_approve": "never", "approved_only": True})
    assert created.status_code == 201, created.content
    assert (created.json()["auto_approve"], created.json()["approved_only"]) == ("never", True)
    remembered = post(agent, f"{API}/banks/keys-bank/remember", {"text": "Offer a replacement before a refund."})
    assert remembered.status_code == 201 and remembered.json()["status"] == "pending", remembered.content


def test_only_a_reviewers_session_sets_the_approval_policy_through_the_api(client, operator_user, reviewer_user,
                                                                          role_admin_user):
    client.force_login(operator_user)
    refused = post(client, f"{API}/banks", {"name": "Operators bank", "auto_approve": "always"})
    assert refused.status_code == 403 and "only a reviewer" in refused.json()["detail"]
    client.force_login(role_admin_user)
    created = post(client, f"{API}/banks", {"name": "Admins bank", "auto_approve": "always"})
    assert created.status_code == 201 and created.json()["auto_approve"] == "always", created.content


def test_the_bank_pages_let_operators_set_retrieval_and_reviewers_the_approval_policy(client, operator_user,
                                                                                       reviewer_user, bank):
    client.force_login(operator_user)
    saved = client.post(reverse("orbs:bank_policy", args=[bank.slug]),
                        FORM | {"retrieval_k": 3, "auto_approve": "always", "approved_only": ""})
    assert saved.status_code == 302
    bank.refresh_from_db()
    assert (bank.retrieval_k, bank.auto_approve, bank.approved_only) == (3, "never", True)
    created = client.post(reverse("orbs:bank_create"), FORM | {"name": "Operators bank", "auto_approve": "always"})
    assert created.status_code == 302 and MemoryBank.objects.get(name="Operators bank").auto_approve == "never"
    client.force_login(reviewer_user)
    page = client.get(reverse("orbs:bank_detail", args=[bank.slug])).content.decode()
    assert "Save policy" in page and "Set by an operator." in page
    saved = client.post(reverse("orbs:bank_policy", args=[bank.slug]),
                        FORM | {"retrieval_k": 9, "auto_approve": "by_rule"})
    assert saved.status_code == 302
    bank.refresh_from_db()
    assert (bank.retrieval_k, bank.auto_approve) == (3, "by_rule")
