"""The judging form's optional rating in a real browser: the rule (a score and a reaction, or
neither) is stated beside the fields before anyone breaks it, and a score given alone is refused
at the rating, in plain words, keeping the answers; no raw field name heads the form."""
import pytest
from django.urls import reverse

from annotation.models import Judgment
from annotation.services import assignment_next
from tests.browser import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_score_without_a_reaction_is_explained_at_the_rating(browser_page, live_server, make_campaign,
                                                                make_items, annotator_user):
    campaign = make_campaign()
    make_items(campaign, 1)
    assignment = assignment_next(campaign=campaign, annotator=annotator_user)
    page = browser_page
    login(page, live_server, annotator_user)
    page.goto(live_server.url + reverse("annotation:judge", args=[assignment.token]))
    rating = page.locator("fieldset.rating")
    assert "give both a satisfaction score and a reaction, or neither" in rating.inner_text()
    for key in ("1", "2", "1"):
        page.keyboard.press(key)
    page.get_by_label("Satisfaction (1 = not at all, 10 = completely)").select_option("7")
    page.get_by_role("button", name="Submit and go to the next item").click()
    rating.locator(".errorlist").wait_for()
    assert rating.locator(".errorlist").inner_text() == (
        "You gave a satisfaction score: choose a reaction too (Like, Dislike or Neither), or set the score "
        "back to “no score”.")
    form_text = page.locator("#judge-form").inner_text()
    assert "action:" not in form_text and "choose one of" not in form_text
    assert page.get_by_role("alert").inner_text() == "Not saved yet: one answer needs your attention (marked below)."
    assert page.get_by_label("Satisfaction (1 = not at all, 10 = completely)").input_value() == "7"
    assert not Judgment.objects.exists()
    page.get_by_label("Like", exact=True).check()
    page.get_by_role("button", name="Submit and go to the next item").click()
    page.wait_for_url("**/annotation/**")
    assert Judgment.objects.get().score == 7


def test_without_javascript_a_missing_criterion_is_marked_at_its_question(browser, live_server, make_campaign,
                                                                           make_items, annotator_user):
    campaign = make_campaign()
    make_items(campaign, 1)
    assignment = assignment_next(campaign=campaign, annotator=annotator_user)
    context = browser.new_context(java_script_enabled=False)  # the browser's own check would stop the submit
    page = context.new_page()
    login(page, live_server, annotator_user)
    page.goto(live_server.url + reverse("annotation:judge", args=[assignment.token]))
    page.get_by_label("A is better").first.check()
    page.get_by_role("button", name="Submit and go to the next item").click()
    relevance = page.locator('fieldset[data-criterion="relevance"]')
    assert relevance.locator(".errorlist").inner_text() == "Choose an answer to this question: A or B is better."
    assert page.locator('fieldset[data-criterion="naturalness"] .errorlist').count() == 0
    context.close()
