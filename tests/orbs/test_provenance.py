"""An Orb's provenance (orbs/services/provenance.py): its source episodes, every retrieval that
returned it with its prompt state, and the outcome of the episode it was served in."""
import pytest
from django.urls import reverse

from orbs.models import RetrievalHit
from orbs.services import orb_flag, orb_provenance, orbs_retrieve, retrieval_outcome_record

SITUATIONS = ["My new washing machine leaks water all over the kitchen floor.",
              "The washer I bought leaks water from the bottom.",
              "I want to exchange the jeans I bought for a larger size."]


@pytest.fixture
def reviewer(client, reviewer_user):
    client.force_login(reviewer_user)
    return client


def test_it_marks_each_hit_injected_cut_by_the_budget_or_withheld(bank, make_orb):
    orbs = [make_orb(text) for text in SITUATIONS]
    bank.prompt_token_budget = 120  # room for about one entry
    bank.save()
    result = orbs_retrieve(bank=bank, query="washer leaks water", context={}, withhold=lambda pk: pk == orbs[0].pk)
    states = {hit.orb.pk: (hit.withheld, hit.injected) for hit in result.hits}
    assert states[orbs[0].pk] == (True, False)
    assert [hit.injected for hit in result.hits if not hit.withheld][:2] == [True, False]
    withheld_rank = next(hit.rank for hit in result.hits if hit.withheld)
    assert result.prompt_block and f"[{withheld_rank}] " not in result.prompt_block
    rows = {row.orb_id: (row.withheld, row.injected) for row in RetrievalHit.objects.filter(retrieval_id=result.retrieval_id)}
    assert rows == states


def test_the_provenance_page_follows_an_orb_to_every_retrieval_and_its_outcome(reviewer, bank, make_orb):
    orbs = [make_orb(text) for text in SITUATIONS]
    served = orbs_retrieve(bank=bank, query="washer leaks water", context={})
    withheld = orbs_retrieve(bank=bank, query="leaking washing machine", context={},
                             withhold=lambda pk: pk == orbs[0].pk)
    retrieval_outcome_record(retrieval_ids=[served.retrieval_id], success=True, episode_ref="evaluation-episode:7")
    retrieval_outcome_record(retrieval_ids=[withheld.retrieval_id], success=False, episode_ref="evaluation-episode:8")
    provenance = orb_provenance(orb=orbs[0])
    assert [source["orb"] for source in provenance["sources"]] == [orbs[0]]
    assert [row["state"] for row in provenance["retrievals"]] == ["withheld at random", "injected"]
    assert provenance["counts"] == {"retrievals": 2, "injected": 1, "cut": 0, "withheld": 1, "unrecorded": 0,
                                         "outcomes": 2, "successes": 1}

    assert orb_flag(orb_id=orbs[0].pk, note="lowers success") and not orb_flag(orb_id=orbs[0].pk, note="again")
    page = reviewer.get(reverse("orbs:provenance", args=[orbs[0].pk])).content.decode()
    assert "evaluation-episode:7" in page and "evaluation-episode:8" in page and "withheld at random" in page
    detail = reviewer.get(reverse("orbs:detail", args=[orbs[0].pk])).content.decode()
    assert reverse("orbs:provenance", args=[orbs[0].pk]) in detail and "lowers success" in detail
    assert reverse("evaluation:orb_effect", args=[orbs[0].pk]) in detail
    queue = reviewer.get(reverse("orbs:queue") + "?flagged=on").content.decode()
    assert f"#{orbs[0].pk} " in queue and f"#{orbs[1].pk} " not in queue and "flagged: lowers success" in queue
    assert orbs[0].events.filter(action="flagged").count() == 1
