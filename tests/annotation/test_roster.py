"""A campaign's roster: an empty one lets every workspace annotator work (as before rosters); a
non-empty one hands work only to its members, and removing someone releases their open work."""
import pytest
from django.urls import reverse

from annotation.models import Assignment, FeedbackTask, RosterMember
from annotation.services import (
    RosterError,
    SubmitError,
    annotator_pool,
    assignment_next,
    feedback_task_next,
    feedback_task_submit,
    judgment_submit,
    roster_add,
    roster_remove,
)
from memweb.roles import Role

CHOICES = {"naturalness": "A", "relevance": "B", "overall_quality": "A"}


@pytest.fixture
def campaign(make_campaign, make_items):
    campaign = make_campaign(annotators_per_item=2)
    make_items(campaign, 3)
    return campaign


def test_an_empty_roster_lets_every_workspace_annotator_judge(campaign, annotators):
    first, second = annotators(2)
    assert assignment_next(campaign=campaign, annotator=first) is not None
    assert assignment_next(campaign=campaign, annotator=second) is not None


def test_a_roster_hands_judging_and_writing_only_to_its_members(campaign, make_items, annotators, operator_user):
    member, outsider = annotators(2)
    unwritten = make_items(campaign, 1, human_feedback="")[0]
    FeedbackTask.objects.create(campaign=campaign, item=unwritten)
    roster_add(campaign=campaign, annotator_id=member.pk, added_by=operator_user)
    assert assignment_next(campaign=campaign, annotator=outsider) is None
    assert feedback_task_next(campaign=campaign, writer=outsider) is None
    assert assignment_next(campaign=campaign, annotator=member) is not None
    assert feedback_task_next(campaign=campaign, writer=member).item == unwritten
    assert set(annotator_pool(campaign=campaign)) == {member.pk}


def test_the_first_member_releases_everyone_elses_open_work(campaign, annotators, operator_user):
    member, outsider = annotators(2)
    held = assignment_next(campaign=campaign, annotator=outsider)
    roster_add(campaign=campaign, annotator_id=member.pk, added_by=operator_user)
    held.refresh_from_db()
    assert held.status == Assignment.Status.EXPIRED
    with pytest.raises(SubmitError) as refused:
        judgment_submit(token=held.token, annotator=outsider, choices=CHOICES)
    assert refused.value.field == "roster"


def test_removing_a_member_releases_their_unfinished_work_and_keeps_their_judgments(
        campaign, make_items, annotators, operator_user):
    kept, leaving = annotators(2)
    for person in (kept, leaving):
        roster_add(campaign=campaign, annotator_id=person.pk, added_by=operator_user)
    finished = assignment_next(campaign=campaign, annotator=leaving)
    judgment_submit(token=finished.token, annotator=leaving, choices=CHOICES)
    unfinished = assignment_next(campaign=campaign, annotator=leaving)
    task = FeedbackTask.objects.create(campaign=campaign, item=make_items(campaign, 1, human_feedback="")[0])
    feedback_task_next(campaign=campaign, writer=leaving)

    assert roster_remove(campaign=campaign, annotator_id=leaving.pk) == 2
    unfinished.refresh_from_db()
    task.refresh_from_db()
    assert unfinished.status == Assignment.Status.EXPIRED
    assert (task.status, task.writer) == (FeedbackTask.Status.OPEN, None)
    assert Assignment.objects.get(pk=finished.pk).status == Assignment.Status.COMPLETED
    with pytest.raises(SubmitError):
        feedback_task_submit(token=task.token, writer=leaving, text="late", score=5, action="like")
    assert assignment_next(campaign=campaign, annotator=kept).item_id == unfinished.item_id


def test_only_workspace_annotators_join_once(campaign, annotator_user, operator_user, user_for_role):
    with pytest.raises(RosterError, match="annotator of this workspace"):
        roster_add(campaign=campaign, annotator_id=operator_user.pk, added_by=operator_user)
    with pytest.raises(RosterError, match="annotator of this workspace"):
        roster_add(campaign=campaign, annotator_id="nobody", added_by=operator_user)
    roster_add(campaign=campaign, annotator_id=annotator_user.pk, added_by=operator_user)
    with pytest.raises(RosterError, match="already"):
        roster_add(campaign=campaign, annotator_id=annotator_user.pk, added_by=operator_user)
    with pytest.raises(RosterError, match="not on the roster"):
        roster_remove(campaign=campaign, annotator_id=operator_user.pk)


def test_the_campaign_page_says_an_empty_roster_means_everyone_and_edits_it(client, campaign, operator_user,
                                                                            annotators):
    member, other = annotators(2)
    client.force_login(operator_user)
    detail = reverse("annotation:campaign_detail", args=[campaign.pk])
    page = client.get(detail).content.decode()
    assert "every annotator of this workspace may work on this campaign" in page
    answer = client.post(reverse("annotation:roster_add", args=[campaign.pk]), {"annotator": member.pk})
    assert answer.status_code == 302 and answer["Location"].endswith("#roster")
    assert list(RosterMember.objects.values_list("annotator__username", flat=True)) == [member.username]
    page = client.get(detail).content.decode()
    assert f'data-annotator="{member.username}"' in page and "Only this annotator may" in page
    refused = client.post(reverse("annotation:roster_add", args=[campaign.pk]), {"annotator": ""}, follow=True)
    assert "Roster: choose an annotator of this workspace." in refused.content.decode()
    client.post(reverse("annotation:roster_remove", args=[campaign.pk, member.pk]))
    assert not RosterMember.objects.exists()


def test_the_queue_shows_a_rostered_campaign_only_to_its_members(client, campaign, annotators, operator_user):
    member, outsider = annotators(2)
    roster_add(campaign=campaign, annotator_id=member.pk, added_by=operator_user)
    client.force_login(outsider)
    assert campaign.name not in client.get(reverse("annotation:queue")).content.decode()
    client.force_login(member)
    assert campaign.name in client.get(reverse("annotation:queue")).content.decode()


@pytest.mark.parametrize("role", [Role.ANNOTATOR, Role.REVIEWER])
def test_only_operators_edit_a_roster(client, campaign, user_for_role, annotator_user, role):
    client.force_login(user_for_role(role))
    answer = client.post(reverse("annotation:roster_add", args=[campaign.pk]), {"annotator": annotator_user.pk})
    assert answer.status_code == 403 and not RosterMember.objects.exists()
