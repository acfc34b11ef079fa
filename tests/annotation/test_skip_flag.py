"""Skip and flag while judging or writing feedback, the lead's decision on a flagged item, and the
"item n of N for you" progress on both work pages."""
import pytest
from django.urls import reverse

from annotation.models import Assignment, FeedbackTask, Flag, Item, Skip
from annotation.services import (
    SubmitError,
    assignment_flag,
    assignment_next,
    assignment_skip,
    feedback_task_flag,
    feedback_task_next,
    feedback_task_skip,
    flags_clear,
    judging_position,
    judgment_submit,
    writing_position,
)

CHOICES = {"naturalness": "A", "relevance": "B", "overall_quality": "A"}


@pytest.fixture
def campaign(make_campaign, make_items):
    campaign = make_campaign(annotators_per_item=1)
    make_items(campaign, 1)
    return campaign


def test_a_skipped_item_goes_to_someone_else_and_never_back(campaign, make_items, annotators):
    skipper, other = annotators(2)
    assignment = assignment_next(campaign=campaign, annotator=skipper)
    assignment_skip(token=assignment.token, annotator=skipper, reason="  I know this customer  ")
    assignment.refresh_from_db()
    assert assignment.status == Assignment.Status.EXPIRED
    assert Skip.objects.get().reason == "I know this customer"
    assert assignment_next(campaign=campaign, annotator=skipper) is None
    assert assignment_next(campaign=campaign, annotator=other).item_id == assignment.item_id
    with pytest.raises(SubmitError) as late:
        judgment_submit(token=assignment.token, annotator=skipper, choices=CHOICES)
    assert "skipped or flagged" in late.value.reason


def test_skip_hands_the_annotator_their_next_item_on_the_page(client, campaign, make_items, annotator_user):
    make_items(campaign, 1)
    first = assignment_next(campaign=campaign, annotator=annotator_user)
    client.force_login(annotator_user)
    answer = client.post(reverse("annotation:judge_skip", args=[first.token]), {"skip_reason": ""})
    following = Assignment.objects.get(annotator=annotator_user, status=Assignment.Status.ASSIGNED)
    assert following.item_id != first.item_id
    assert answer["Location"] == reverse("annotation:judge", args=[following.token])


def test_a_flag_needs_a_reason_and_other_needs_words(campaign, annotator_user):
    assignment = assignment_next(campaign=campaign, annotator=annotator_user)
    with pytest.raises(SubmitError) as missing:
        assignment_flag(token=assignment.token, annotator=annotator_user, reason="")
    assert missing.value.field == "flag_reason"
    with pytest.raises(SubmitError) as wordless:
        assignment_flag(token=assignment.token, annotator=annotator_user, reason="other", note=" ")
    assert wordless.value.field == "flag_note"
    assert not Flag.objects.exists()
    assert Assignment.objects.get().status == Assignment.Status.ASSIGNED  # nothing half-done


def test_the_judge_page_shows_a_flag_problem_at_its_field(client, campaign, annotator_user):
    assignment = assignment_next(campaign=campaign, annotator=annotator_user)
    client.force_login(annotator_user)
    answer = client.post(reverse("annotation:judge_flag", args=[assignment.token]),
                         {"flag_reason": "other", "flag_note": ""})
    page = answer.content.decode()
    assert answer.status_code == 400
    assert "Say what is wrong with the item when the reason is “other”." in page
    assert 'id="triage" open' in page and "Not saved yet" not in page


def test_a_flagged_item_is_held_until_the_lead_clears_it(campaign, annotators, operator_user):
    flagger, other = annotators(2)
    assignment = assignment_next(campaign=campaign, annotator=flagger)
    assignment_flag(token=assignment.token, annotator=flagger, reason=Flag.Reason.OFFENSIVE, note="insults")
    assert assignment_next(campaign=campaign, annotator=other) is None
    assert flags_clear(item=assignment.item, cleared_by=operator_user) == 1
    flag = Flag.objects.get()
    assert flag.cleared_by == operator_user and flag.cleared_at is not None
    assert assignment_next(campaign=campaign, annotator=other).item_id == assignment.item_id
    assert assignment_next(campaign=campaign, annotator=flagger) is None  # never back to who flagged it


def test_the_lead_sees_flags_with_reasons_and_withdraws_or_clears(client, campaign, make_items, annotators,
                                                                   operator_user):
    flagger = annotators(1)[0]
    first = assignment_next(campaign=campaign, annotator=flagger)
    assignment_flag(token=first.token, annotator=flagger, reason=Flag.Reason.BROKEN, note="the agent's turns are empty")
    second_item = make_items(campaign, 1)[0]
    second = assignment_next(campaign=campaign, annotator=flagger)
    assignment_flag(token=second.token, annotator=flagger, reason=Flag.Reason.UNCLEAR, note="<b>which side?</b>")
    client.force_login(operator_user)
    detail = reverse("annotation:campaign_detail", args=[campaign.pk])
    page = client.get(detail).content.decode()
    assert "Broken conversation" in page and "the agent&#x27;s turns are empty" in page and "Unclear" in page
    assert "&lt;b&gt;which side?&lt;/b&gt;" in page and "<b>which side?" not in page  # shown as text
    client.post(reverse("annotation:item_withdraw", args=[campaign.pk, first.item_id]))
    assert not Item.objects.filter(pk=first.item_id).exists()
    client.post(reverse("annotation:item_flags_clear", args=[campaign.pk, second_item.pk]))
    assert not Flag.objects.filter(cleared_at__isnull=True).exists()
    assert "No flagged items" in client.get(detail).content.decode()


def test_writers_skip_and_flag_conversations_too(make_campaign, make_items, annotators):
    campaign = make_campaign()
    for item in make_items(campaign, 2, human_feedback=""):
        FeedbackTask.objects.create(campaign=campaign, item=item)
    skipper, flagger, third = annotators(3)
    skipped = feedback_task_next(campaign=campaign, writer=skipper)
    feedback_task_skip(token=skipped.token, writer=skipper, reason="not my language")
    skipped.refresh_from_db()
    assert (skipped.status, skipped.writer) == (FeedbackTask.Status.OPEN, None)
    flagged = feedback_task_next(campaign=campaign, writer=flagger)
    assert flagged == skipped  # the skipped conversation goes to the next writer
    feedback_task_flag(token=flagged.token, writer=flagger, reason=Flag.Reason.BROKEN)
    assert Flag.objects.get().stage == "writing"
    later = feedback_task_next(campaign=campaign, writer=third)
    assert later.item_id != flagged.item_id  # held: nobody writes it while the flag is open
    assert feedback_task_next(campaign=campaign, writer=skipper) is None  # the other one is taken


def test_a_finished_item_cannot_be_skipped(campaign, annotator_user):
    assignment = assignment_next(campaign=campaign, annotator=annotator_user)
    judgment_submit(token=assignment.token, annotator=annotator_user, choices=CHOICES)
    with pytest.raises(SubmitError, match="no longer yours"):
        assignment_skip(token=assignment.token, annotator=annotator_user)


def test_the_judge_page_says_item_n_of_n_for_you(client, campaign, make_items, annotator_user):
    make_items(campaign, 2)
    first = assignment_next(campaign=campaign, annotator=annotator_user)
    assert judging_position(assignment=first, annotator=annotator_user) == (1, 3)
    client.force_login(annotator_user)
    assert "Item 1 of 3 for you in this campaign" in client.get(
        reverse("annotation:judge", args=[first.token])).content.decode()
    judgment_submit(token=first.token, annotator=annotator_user, choices=CHOICES)
    second = assignment_next(campaign=campaign, annotator=annotator_user)
    assert "Item 2 of 3 for you in this campaign" in client.get(
        reverse("annotation:judge", args=[second.token])).content.decode()
    first.refresh_from_db()
    assert judging_position(assignment=first, annotator=annotator_user) == (1, 3)  # a finished one keeps its place


def test_the_writing_page_says_item_n_of_n_for_you(client, make_campaign, make_items, annotator_user):
    campaign = make_campaign()
    for item in make_items(campaign, 4, human_feedback=""):
        FeedbackTask.objects.create(campaign=campaign, item=item)
    task = feedback_task_next(campaign=campaign, writer=annotator_user)
    assert writing_position(task=task, writer=annotator_user) == (1, 4)
    client.force_login(annotator_user)
    page = client.get(reverse("annotation:write", args=[task.token])).content.decode()
    assert "Item 1 of 4 for you in this campaign" in page
    client.post(reverse("annotation:write_skip", args=[task.token]))
    following = FeedbackTask.objects.get(writer=annotator_user)
    assert "Item 1 of 3 for you in this campaign" in client.get(
        reverse("annotation:write", args=[following.token])).content.decode()
