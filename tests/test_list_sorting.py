"""Every sortable list (issue 18) sorts by each column it offers, both ways, on the real database:
a sort key naming a field or expression that does not exist would fail here, not on a user's page
(an empty list still runs its ordered query)."""
import pytest
from django.urls import reverse

from annotation.models import Campaign
from annotation.views import CAMPAIGN_SORTING, ITEM_SORTING
from evaluation.feedback.views import FEEDBACK_SORTING
from evaluation.runs.views import RUN_SORTING
from evaluation.views import EPISODE_SORTING, TASK_SORTING
from memweb.views import JOB_SORTING
from orbs.dmrm.views import EXPERIENCE_SORTING
from orbs.services import bank_get_or_create
from orbs.views import BANK_SORTING, QUEUE_SORTING
from tests.evaluation.runs.test_heatmap import GRID, outcomes_run

LISTS = [("evaluation:episode_list", EPISODE_SORTING), ("evaluation:task_list", TASK_SORTING),
         ("evaluation:run_list", RUN_SORTING), ("evaluation:feedback_browser", FEEDBACK_SORTING),
         ("job_list", JOB_SORTING), ("annotation:campaign_list", CAMPAIGN_SORTING),
         ("orbs:experience_list", EXPERIENCE_SORTING), ("orbs:queue", QUEUE_SORTING), ("orbs:bank_list", BANK_SORTING)]


@pytest.mark.parametrize(("url_name", "sorting"), LISTS, ids=[name for name, _ in LISTS])
def test_each_list_sorts_by_each_of_its_columns(client, role_admin_user, url_name, sorting):
    client.force_login(role_admin_user)
    outcomes_run(GRID)
    bank_get_or_create(name="sorting")
    for key in sorting.columns:
        for asked in (key, f"-{key}"):
            response = client.get(reverse(url_name), {"sort": asked})
            assert response.status_code == 200 and "cannot be sorted" not in response.content.decode(), asked


def test_a_campaigns_items_sort_by_each_of_their_columns(client, role_admin_user):
    client.force_login(role_admin_user)
    campaign = Campaign.objects.create(name="sorting")
    campaign.items.create(simulated_feedback="fine", language="en", task_format="SiSo", domain="shop")
    for key in ITEM_SORTING.columns:
        response = client.get(reverse("annotation:campaign_detail", args=[campaign.pk]), {"sort": f"-{key}"})
        assert response.status_code == 200 and 'aria-sort="descending"' in response.content.decode()
