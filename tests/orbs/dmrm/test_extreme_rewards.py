"""Extreme values (issue 32): the API refuses a reward that is not finite or beyond the bound, naming
the field; the Q-value chart of experiences stored before stays readable (robust bins with overflow
bins, short labels, a y axis scaled to the counts)."""
import json
import math

import pytest
from django.urls import reverse

from orbs.dmrm.models import Experience
from orbs.dmrm.qlearning import histogram
from orbs.dmrm.schemas import MAX_ABS_REWARD
from orbs.dmrm.services import experience_append
from orbs.services import bank_get_or_create
from tests.browser import login
from tests.orbs.dmrm.test_api import API, transition


@pytest.mark.parametrize("reward", [1e308, -MAX_ABS_REWARD - 1, float("inf"), float("nan")])
def test_the_api_refuses_an_extreme_reward_naming_the_field(agent, dmrm, reward):
    url = f"{API}/banks/{dmrm.bank.slug}/transitions"
    body = json.dumps({"transitions": [transition(0), transition(1, reward=reward)]})  # inf and nan as JSON allows

    response = agent.post(url, body, content_type="application/json")

    assert response.status_code == 422, response.content
    problem = response.json()["detail"][0]
    assert problem["loc"][-3:] == ["transitions", 1, "reward"]
    assert f"at most {MAX_ABS_REWARD:g} in absolute value" in problem["msg"] or "finite number" in problem["msg"]
    assert not Experience.objects.exists()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_one_extreme_q_value_leaves_the_chart_readable(browser_page, live_server, reviewer_user):
    bank = bank_get_or_create(name="extremes")
    for step in range(20):
        experience_append(bank=bank, trajectory_id="t1", step=step, goal="return the jacket",
                          observation=f"state {step}", action=f"act {step}", reward=step / 20)
    for step in range(20):
        Experience.objects.filter(step=step).update(q_value=step / 20)
    Experience.objects.filter(step=19).update(q_value=1e307)  # stored before the API refused such rewards
    Experience.objects.filter(step=18).update(q_value=float("inf"))
    page = browser_page
    login(page, live_server, reviewer_user)
    page.goto(live_server.url + reverse("orbs:experience_list"))
    page.wait_for_function("() => Chart.getChart('q-chart') !== undefined")

    chart = page.evaluate("""() => { const c = Chart.getChart('q-chart');
        return {labels: c.data.labels, counts: c.data.datasets[0].data, yMax: c.scales.y.max}; }""")

    assert sum(chart["counts"]) == 20
    assert max(len(label) for label in chart["labels"]) <= 20, chart["labels"]
    assert chart["labels"][-1].startswith(">") and chart["counts"][-1] == 2  # the overflow bin
    assert sum(1 for count in chart["counts"][:-1] if count) >= 5  # the ordinary values spread over the bins
    assert max(chart["counts"]) <= chart["yMax"] <= 2 * max(chart["counts"]) + 1


@pytest.mark.parametrize("values", [[1.7e308] * 3 + [-1.7e308] * 3 + [0.0], [0.1, 0.2, 0.3, 0.4, 5e300],
                                    [float("-inf"), 0.0, 0.5, 1.0, float("nan")]])
def test_the_bins_stay_short_and_count_every_number_near_the_float_limit(values):
    chart = histogram(values)

    assert sum(chart["counts"]) == sum(1 for value in values if not math.isnan(value))
    assert all(len(label) <= 24 and "nan" not in label and "inf" not in label for label in chart["labels"])
