"""In chromium, end to end: an operator defines a rule score on a task set (a bad regex is refused at
its field and in the summary), scores a finished run, and reads the values beside the reward on the
run page and an episode's page; at phone and desktop widths nothing scrolls sideways."""
import os

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from evaluation.models import Episode
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = os.environ.get("SCORES_SHOTS", "")  # a folder to save screenshots in, when set
WIDTHS = (1440, 390)


def _fits(page, name: str, part: str = "main") -> None:
    """At each width the page has no sideways scroll (and a screenshot, when asked for)."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{name} scrolls sideways by {overflow}px at {width}px"
        if SHOTS:
            page.locator(part).screenshot(path=os.path.join(SHOTS, f"{name}-{width}.png"))
    page.set_viewport_size({"width": 1280, "height": 860})


def test_a_rule_score_is_defined_scored_and_shown_beside_the_reward(browser_page, live_server, operator_user,
                                                                     finished_run):
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("evaluation:task_list"))
    page.locator("#task-set-scores-links").get_by_role("link", name=finished_run.task_set.name).click()
    expect(page.locator("#scores-empty")).to_be_visible()

    page.get_by_label("Name", exact=True).fill("Asks for the order")
    page.get_by_label("Kind", exact=True).select_option("reply_matches")
    expect(page.get_by_label("Tool name")).to_be_hidden()
    page.get_by_label("Regular expression").fill("(order")
    page.locator("#score-create").click()
    expect(page.locator("#score-form-errors")).to_contain_text("Regular expression — not a valid regular expression")
    expect(page.locator(".field-error .errorlist")).to_contain_text("not a valid regular expression")

    page.get_by_label("Regular expression").fill("(?i)order")
    page.locator("#score-create").click()
    row = page.locator("#score-definitions tr[data-score=asks-for-the-order]")
    expect(row).to_contain_text("an agent reply must match /(?i)order/")
    expect(row.locator("td.num")).to_have_text("3")  # the new score's job scored the finished run's episodes
    _fits(page, "task-set-scores")

    page.goto(live_server.url + finished_run.get_absolute_url())
    card = page.locator("#custom-scores")
    expect(card.locator("tr[data-score=asks-for-the-order] td").nth(3)).to_have_text("3")
    expect(card).to_contain_text("rule over the stored transcript")
    expect(card.locator("#custom-scores-reward")).to_contain_text("mean reward")
    card.locator("#run-score-button").click()
    page.wait_for_url(f"**{finished_run.get_absolute_url()}#custom-scores")
    expect(page.locator("#custom-scores tr[data-score=asks-for-the-order] td").nth(3)).to_have_text("3")
    _fits(page, "run-custom-scores", "#custom-scores")

    episode = Episode.objects.filter(run_episode__run=finished_run).order_by("pk").first()
    page.goto(live_server.url + episode.get_absolute_url())
    score = page.locator("#episode-custom-scores tr[data-score=asks-for-the-order]")
    expect(score).to_contain_text("matched /(?i)order/")
    expect(score.locator(".badge")).to_have_text("pass" if episode.custom_scores.get().passed else "fail")
    _fits(page, "episode-custom-scores", "#episode-custom-scores")
