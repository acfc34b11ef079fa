"""The demo campaign loads once, is open, and already has results to show."""
import io

from annotation.demo import CAMPAIGN_NAME, load_demo
from annotation.models import Campaign, FeedbackTask
from annotation.services import assignment_next, campaign_results


def test_it_loads_an_open_campaign_with_judgments_once(db, user_for_role):
    load_demo(stdout=io.StringIO())
    again = io.StringIO()
    load_demo(stdout=again)
    assert "already exists" in again.getvalue()
    campaign = Campaign.objects.get(name=CAMPAIGN_NAME)
    assert campaign.status == Campaign.Status.OPEN
    assert set(campaign.items.values_list("language", flat=True)) == {"en", "zh"}
    assert set(campaign.items.values_list("task_format", flat=True)) == {"LiSo", "SiLo", "LiLo", "SiSo"}
    assert FeedbackTask.objects.filter(campaign=campaign, status=FeedbackTask.Status.OPEN).count() == 2
    results = campaign_results(campaign=campaign)
    assert results["progress"]["judgments_done"] == 15
    assert results["overall"][0]["kappa_items"] == 5
    visitor = user_for_role("annotator")
    assert assignment_next(campaign=campaign, annotator=visitor) is not None  # something is left to judge
