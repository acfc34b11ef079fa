"""Recording judgments and written feedback: validation, idempotence, late submits."""
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import Assignment, Campaign, FeedbackTask, Judgment
from annotation.services import (
    SubmitError,
    assignment_next,
    feedback_task_next,
    feedback_task_submit,
    items_from_conversations,
    judgment_submit,
)
from tests.annotation.conftest import item_fields

CHOICES = {"naturalness": "A", "relevance": "B", "overall_quality": "A"}


@pytest.fixture
def assignment(make_campaign, make_items, annotator_user):
    campaign = make_campaign()
    make_items(campaign, 1)
    return assignment_next(campaign=campaign, annotator=annotator_user)


def test_it_resolves_sides_to_sources_with_the_assignment_randomisation(assignment):
    judgment = judgment_submit(token=assignment.token, annotator=assignment.annotator, choices=CHOICES).judgment
    a_source = "human" if assignment.side_a_is_human else "simulated"
    b_source = "simulated" if assignment.side_a_is_human else "human"
    assert judgment.choices == CHOICES
    assert judgment.preferences == {"naturalness": a_source, "relevance": b_source, "overall_quality": a_source}
    assignment.refresh_from_db()
    assert assignment.status == Assignment.Status.COMPLETED and assignment.completed_at is not None


def test_it_stores_one_judgment_when_submitted_twice(assignment):
    first = judgment_submit(token=assignment.token, annotator=assignment.annotator, choices=CHOICES,
                            comment="first")
    second = judgment_submit(token=assignment.token, annotator=assignment.annotator,
                             choices={"naturalness": "B", "relevance": "B", "overall_quality": "B"}, comment="again")
    assert first.created and not second.created
    assert second.judgment.pk == first.judgment.pk
    assert Judgment.objects.get().comment == "first"


@pytest.mark.parametrize("choices, field", [
    ({"naturalness": "A", "relevance": "B"}, "overall_quality"),
    ({**CHOICES, "relevance": "tie"}, "relevance"),
    ({**CHOICES, "humour": "A"}, "humour"),
])
def test_it_names_the_field_of_a_bad_choice_and_stores_nothing(assignment, choices, field):
    with pytest.raises(SubmitError) as raised:
        judgment_submit(token=assignment.token, annotator=assignment.annotator, choices=choices)
    assert raised.value.field == field
    assert not Judgment.objects.exists()


def test_it_accepts_ties_when_the_campaign_allows_them(make_campaign, make_items, annotator_user):
    campaign = make_campaign(allow_ties=True)
    make_items(campaign, 1)
    assignment = assignment_next(campaign=campaign, annotator=annotator_user)
    judgment = judgment_submit(token=assignment.token, annotator=annotator_user,
                               choices={**CHOICES, "relevance": "tie"}).judgment
    assert judgment.preferences["relevance"] == "tie"


def test_it_refuses_another_annotators_assignment(assignment, user_for_role):
    with pytest.raises(Assignment.DoesNotExist):
        judgment_submit(token=assignment.token, annotator=user_for_role("annotator"), choices=CHOICES)


def test_it_clamps_the_browser_timer_and_keeps_the_comment(assignment):
    judgment = judgment_submit(token=assignment.token, annotator=assignment.annotator, choices=CHOICES,
                               comment="  both fine  ", time_spent_ms=10**12).judgment
    assert judgment.time_spent_ms == 24 * 3600 * 1000 and judgment.comment == "both fine"


def test_it_accepts_a_late_submit_while_the_item_still_has_room(assignment):
    Assignment.objects.filter(pk=assignment.pk).update(status=Assignment.Status.EXPIRED)
    assert judgment_submit(token=assignment.token, annotator=assignment.annotator, choices=CHOICES).created


def test_it_refuses_a_late_submit_once_others_filled_the_item(make_campaign, make_items, annotators):
    campaign = make_campaign(annotators_per_item=1, assignment_timeout_minutes=5)
    make_items(campaign, 1)
    late, other = annotators(2)
    stale = assignment_next(campaign=campaign, annotator=late)
    Assignment.objects.filter(pk=stale.pk).update(assigned_at=timezone.now() - timedelta(minutes=6))
    assert assignment_next(campaign=campaign, annotator=other) is not None
    with pytest.raises(SubmitError, match="timed out"):
        judgment_submit(token=stale.token, annotator=late, choices=CHOICES)


def test_it_refuses_judgments_in_a_closed_campaign(assignment):
    assignment.campaign.status_set(Campaign.Status.CLOSED)
    with pytest.raises(SubmitError, match="closed"):
        judgment_submit(token=assignment.token, annotator=assignment.annotator, choices=CHOICES)


def test_it_opens_judging_only_after_the_human_feedback_is_written(make_campaign, annotators):
    campaign = make_campaign()
    report = items_from_conversations(campaign=campaign, conversations=[
        item_fields(human_feedback="", source_ref="episode:1")])
    assert report.ok and report.needs_feedback == 1
    writer, judge = annotators(2)
    assert assignment_next(campaign=campaign, annotator=judge) is None
    task = feedback_task_next(campaign=campaign, writer=writer)
    assert feedback_task_next(campaign=campaign, writer=judge) is None  # the only task is taken
    feedback_task_submit(token=task.token, writer=writer, text="  You ignored my warranty.  ")
    item = task.item
    item.refresh_from_db()
    assert item.human_feedback == "You ignored my warranty." and item.human_feedback_author == writer
    assert assignment_next(campaign=campaign, annotator=judge).item_id == item.pk


def test_it_rejects_empty_feedback_and_keeps_a_double_submit_once(make_campaign, annotator_user):
    campaign = make_campaign()
    items_from_conversations(campaign=campaign, conversations=[item_fields(human_feedback="")])
    task = feedback_task_next(campaign=campaign, writer=annotator_user)
    with pytest.raises(SubmitError) as raised:
        feedback_task_submit(token=task.token, writer=annotator_user, text="   ")
    assert raised.value.field == "text"
    feedback_task_submit(token=task.token, writer=annotator_user, text="first")
    feedback_task_submit(token=task.token, writer=annotator_user, text="second")
    task.refresh_from_db()
    assert task.text == "first" and task.status == FeedbackTask.Status.DONE


def test_it_reclaims_an_abandoned_feedback_task(make_campaign, annotators):
    campaign = make_campaign(assignment_timeout_minutes=10)
    items_from_conversations(campaign=campaign, conversations=[item_fields(human_feedback="")])
    idle, eager = annotators(2)
    task = feedback_task_next(campaign=campaign, writer=idle)
    FeedbackTask.objects.filter(pk=task.pk).update(assigned_at=timezone.now() - timedelta(minutes=11))
    assert feedback_task_next(campaign=campaign, writer=eager).pk == task.pk
    with pytest.raises(SubmitError, match="another annotator"):
        feedback_task_submit(token=task.token, writer=idle, text="too late")
