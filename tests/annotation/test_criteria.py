"""The study's criteria: MemoryBench's wording by default; a campaign keeps the wording it was created with."""
from annotation.models import Campaign, default_criteria


def _overall(criteria: list[dict]) -> str:
    return next(c["definition"] for c in criteria if c["key"] == "overall_quality")


def test_overall_quality_asks_which_feedback_a_real_user_would_plausibly_give(db):
    campaign = Campaign.objects.create(name="new study")
    assert "plausible and reasonable response from a real user" in _overall(campaign.criteria)
    assert "improve the agent" not in _overall(campaign.criteria)


def test_a_campaign_keeps_the_criteria_it_was_created_with(db):
    older = [dict(c) for c in default_criteria()]
    older[2]["definition"] = "Which feedback would be more useful to improve the agent."
    Campaign.objects.create(name="older study", criteria=older)
    assert _overall(Campaign.objects.get(name="older study").criteria) == older[2]["definition"]
