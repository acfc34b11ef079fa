"""Annotators must not be able to tell which side is human: render the judging
page and the API for both randomisations and compare them with the texts swapped."""
import re

import pytest
from django.urls import reverse

from annotation.models import Assignment
from annotation.services import assignment_next, judgment_submit

HUMAN_TEXT = "You never asked which colour I wanted."
SIMULATED_TEXT = "The agent skipped the colour question entirely."
_VOLATILE = [
    (re.compile(r'name="csrfmiddlewaretoken" value="[^"]+"'), 'name="csrfmiddlewaretoken" value="…"'),
    (re.compile(r'"X-CSRFToken": "[^"]+"'), '"X-CSRFToken": "…"'),
]


@pytest.fixture
def assignment(make_campaign, make_items, annotator_user):
    campaign = make_campaign(instructions="Pick the better feedback for each criterion.")
    make_items(campaign, 2, human_feedback=HUMAN_TEXT, simulated_feedback=SIMULATED_TEXT)
    return assignment_next(campaign=campaign, annotator=annotator_user)


def _with_side(assignment, side_a_is_human: bool):
    Assignment.objects.filter(pk=assignment.pk).update(side_a_is_human=side_a_is_human)


def _normalised(text: str) -> str:
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def _swapped(text: str) -> str:
    return text.replace(HUMAN_TEXT, "\0").replace(SIMULATED_TEXT, HUMAN_TEXT).replace("\0", SIMULATED_TEXT)


def test_it_renders_the_judging_page_identically_for_both_randomisations(client, assignment):
    client.force_login(assignment.annotator)
    url = reverse("annotation:judge", args=[assignment.token])
    pages = {}
    for side_a_is_human in (True, False):
        _with_side(assignment, side_a_is_human)
        pages[side_a_is_human] = _normalised(client.get(url).content.decode())
    assert pages[True].index(HUMAN_TEXT) < pages[True].index(SIMULATED_TEXT)
    assert pages[False].index(SIMULATED_TEXT) < pages[False].index(HUMAN_TEXT)
    assert _swapped(pages[True]) == pages[False]  # nothing but the texts' places differs
    for page in pages.values():
        assert "human" not in page.lower()
        assert "simulated" not in page.lower()


def test_it_answers_the_api_identically_for_both_randomisations(client, assignment):
    client.force_login(assignment.annotator)
    url = f"/api/annotation/assignments/{assignment.token}"
    bodies = {}
    for side_a_is_human in (True, False):
        _with_side(assignment, side_a_is_human)
        answer = client.get(url)
        assert answer.status_code == 200
        bodies[side_a_is_human] = answer.content.decode()
    assert _swapped(bodies[True]) == bodies[False]
    for body in bodies.values():
        assert "human" not in body.lower() and "simulated" not in body.lower()
        assert "side_a" not in body and '"item' not in body


def test_it_answers_a_judgment_in_side_terms_only(client, assignment):
    client.force_login(assignment.annotator)
    choices = {"naturalness": "A", "relevance": "B", "overall_quality": "A"}
    answer = client.post(f"/api/annotation/assignments/{assignment.token}/judgment",
                         {"choices": choices}, content_type="application/json")
    assert answer.status_code == 201 and answer.json()["choices"] == choices
    assert "human" not in answer.content.decode() and "simulated" not in answer.content.decode()
    page = client.get(reverse("annotation:judge", args=[assignment.token])).content.decode().lower()
    assert "human" not in page and "simulated" not in page


def test_it_randomises_sides_per_assignment(make_campaign, make_items, annotators):
    campaign = make_campaign(annotators_per_item=1)
    make_items(campaign, 60)
    people = annotators(60)
    sides = [assignment_next(campaign=campaign, annotator=person).side_a_is_human for person in people]
    # 60 fair coin flips all alike has probability 2 * 2**-60.
    assert 0 < sum(sides) < 60


def test_it_keeps_the_queue_free_of_sources(client, assignment):
    client.force_login(assignment.annotator)
    page = client.get(reverse("annotation:queue")).content.decode().lower()
    assert "human" not in page and "simulated" not in page


def test_it_keeps_the_feedback_writing_api_and_page_free_of_the_simulated_user(client, make_campaign, annotator_user):
    from annotation.models import FeedbackTask, Item
    from tests.annotation.conftest import item_fields
    campaign = make_campaign()
    item = Item.objects.create(campaign=campaign, **item_fields(human_feedback="", simulated_feedback=SIMULATED_TEXT,
                                                                simulated_score=7, simulated_action="like",
                                                                simulated_like_probability=0.123))
    FeedbackTask.objects.create(item=item, campaign=campaign)
    client.force_login(annotator_user)
    body = client.post(f"/api/annotation/campaigns/{campaign.pk}/write-next").content.decode()
    page = client.get(reverse("annotation:write", args=[item.feedback_task.token])).content.decode()
    for text in (body, page):
        assert SIMULATED_TEXT not in text and "0.123" not in text and "simulated" not in text.lower()


def test_it_warns_annotators_without_naming_sources(client, assignment):
    from annotation.models import Participant
    Participant.objects.create(campaign=assignment.campaign, annotator=assignment.annotator,
                               standing=Participant.Standing.WARNED)
    client.force_login(assignment.annotator)
    page = client.get(reverse("annotation:queue")).content.decode()
    assert "check items" in page
    assert "human" not in page.lower() and "simulated" not in page.lower()


def test_it_serves_attention_checks_like_any_item(client, make_campaign, make_items, annotator_user):
    campaign = make_campaign(attention_rate=0.5)
    make_items(campaign, 1, human_feedback=HUMAN_TEXT, simulated_feedback=SIMULATED_TEXT)
    make_items(campaign, 1, is_attention=True, gold_expected={"naturalness": "human"},
               human_feedback=HUMAN_TEXT, simulated_feedback=SIMULATED_TEXT)
    client.force_login(annotator_user)
    first = assignment_next(campaign=campaign, annotator=annotator_user)
    judgment_submit(token=first.token, annotator=annotator_user,
                    choices={key: "A" for key in campaign.criterion_keys})
    check = assignment_next(campaign=campaign, annotator=annotator_user)
    assert check.item.is_attention
    pages = []
    for side_a_is_human in (True, False):
        _with_side(check, side_a_is_human)
        pages.append(_normalised(client.get(reverse("annotation:judge", args=[check.token])).content.decode()))
    assert _swapped(pages[0]) == pages[1]
    for page in pages:
        assert "attention" not in page.lower() and "gold" not in page.lower()
