"""The demo campaign loads once, is open, labelled scripted, and has something for every results section."""
import io

from annotation.demo import ALWAYS_A, AT_RANDOM, CAMPAIGN_NAME, load_demo
from annotation.models import Campaign, FeedbackTask
from annotation.services import assignment_next, campaign_results


def test_it_loads_an_open_campaign_with_judgments_once(db, user_for_role):
    load_demo(stdout=io.StringIO())
    again = io.StringIO()
    load_demo(stdout=again)
    assert "already exists" in again.getvalue()
    campaign = Campaign.objects.get(name=CAMPAIGN_NAME)
    assert campaign.status == Campaign.Status.OPEN and "scripted" in campaign.name
    assert "scripted" in campaign.instructions
    assert set(campaign.items.values_list("language", flat=True)) == {"en", "zh"}
    assert set(campaign.items.values_list("task_format", flat=True)) == {"LiSo", "SiLo", "LiLo", "SiSo"}
    assert FeedbackTask.objects.filter(campaign=campaign, status=FeedbackTask.Status.OPEN).count() == 2
    visitor = user_for_role("annotator")
    assert assignment_next(campaign=campaign, annotator=visitor) is not None  # something is left to judge


def test_it_shows_every_results_section(db):
    load_demo(stdout=io.StringIO())
    results = campaign_results(campaign=Campaign.objects.get(name=CAMPAIGN_NAME))
    assert results["sampling"]["gold"] == 2 and results["sampling"]["attention"] == 3
    # The random clicker fails every check and is excluded, the always-A one is warned (and flagged
    # below, for an operator to exclude); every judged item keeps its three honest judgments.
    assert results["excluded"] == 1 and results["overall"][0]["kappa_items"] == 28
    assert all(stats["kappa_interval"]["low"] is not None for stats in results["overall"])
    people = {row["annotator"]: row for row in results["annotators"]}
    assert len(people) == 6 and people[ALWAYS_A]["spam_reasons"] and people[ALWAYS_A]["standing"] == "warned"
    assert people[AT_RANDOM]["standing"] == "excluded"
    assert any(row["gold_total"] for row in people.values())
    assert all(row["attention_total"] == 3 for row in people.values())
    fidelity = results["fidelity"]
    assert fidelity["conversations"] >= 20 and fidelity["reliability"]
    assert all(figure["simulated"]["value"] is not None and figure["ceiling"]["value"] is not None
               for figure in fidelity["figures"])
