"""Campaign data management: conversations added from elsewhere (duplicates refused), the
feedback-writing step before pairwise judging, browsing, edit/withdraw before judging, the
disagreement view's selection, throughput per annotator and day, and the short-pool warning."""
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from annotation.models import Assignment, Campaign, FeedbackTask, Item, Judgment
from annotation.services import (
    ItemLocked,
    annotator_throughput,
    assignment_next,
    campaign_shortfall,
    conversations_add,
    disagreements_list,
    feedback_task_next,
    feedback_task_submit,
    item_update,
    item_withdraw,
    items_available,
    items_browse,
)
from annotation.services.intake import SOURCE_URL_RULE
from tests.annotation.conftest import item_fields

ALL_HUMAN = {"naturalness": "human", "relevance": "human", "overall_quality": "human"}


def judged(item, annotator, when=None, **preferences):
    """A completed judgment with these preferences (side A human, so choices follow)."""
    prefs = ALL_HUMAN | preferences
    assignment = Assignment.objects.create(campaign=item.campaign, item=item, annotator=annotator,
                                           side_a_is_human=True, status=Assignment.Status.COMPLETED)
    return Judgment.objects.create(assignment=assignment, preferences=prefs, created_at=when or datetime.now(
        UTC), choices={key: "A" if value == "human" else "B" for key, value in prefs.items()})


def test_it_adds_conversations_once_and_sends_them_to_the_writers_before_pairwise_judging(
        make_campaign, annotators):
    campaign = make_campaign()
    writer, judge = annotators(2)
    first = conversations_add(campaign=campaign, conversations=[
        item_fields(human_feedback="", source_ref=f"episode:{n}", source_label=f"run #1 · episode #{n}",
                    source_url=f"/evaluation/episodes/{n}/", simulated_scripted=True) for n in (1, 2)])
    again = conversations_add(campaign=campaign, conversations=[
        item_fields(human_feedback="", source_ref=ref) for ref in ("episode:2", "episode:3")])
    assert first.report.created == 2 and first.report.needs_feedback == 2 and not first.duplicates
    assert again.duplicates == ["episode:2"] and again.report.created == 1
    assert campaign.items.count() == 3 and FeedbackTask.objects.filter(campaign=campaign).count() == 3
    item = campaign.items.get(source_ref="episode:1")
    assert (item.source_label, item.source_url, item.simulated_scripted) == (
        "run #1 · episode #1", "/evaluation/episodes/1/", True)
    assert not items_available(campaign=campaign, annotator=judge).exists()  # nothing to judge before feedback
    task = feedback_task_next(campaign=campaign, writer=writer)
    feedback_task_submit(token=task.token, writer=writer, text="You ignored my warranty.", score=3, action="dislike")
    assert assignment_next(campaign=campaign, annotator=judge).item == task.item
    assert not items_available(campaign=campaign, annotator=writer).exists()  # a writer never judges their own


@pytest.mark.parametrize("url", ["javascript:alert(1)", "/\\evil.example/path", "//evil.example/path",
                                 "\\\\evil.example/path", "/\t/evil.example", "http:/evil.example", "https://",
                                 "http://good.example\\@evil.example/", "data:text/html,<b>x</b>", "evaluation/1/"])
def test_it_refuses_a_source_url_that_opens_somewhere_else(make_campaign, url):
    report = conversations_add(campaign=make_campaign(), conversations=[
        item_fields(source_ref="x:1", source_url=url)]).report
    assert [(p.field, p.reason) for p in report.problems] == [("source_url", SOURCE_URL_RULE)]


def test_it_keeps_a_source_url_on_this_site_or_an_absolute_web_address(make_campaign):
    urls = ["/evaluation/episodes/3/?tab=feedback", "https://tickets.example.com/T-1?x=1#a"]
    added = conversations_add(campaign=make_campaign(), conversations=[
        item_fields(source_ref=f"x:{n}", source_url=url) for n, url in enumerate(urls)])
    assert not added.report.problems
    assert sorted(Item.objects.values_list("source_url", flat=True)) == sorted(urls)


def test_it_edits_and_withdraws_an_item_only_until_it_is_judged(make_campaign, make_items, annotators):
    campaign = make_campaign()
    free, taken, done = make_items(campaign, 3)
    first, second = annotators(2)
    assert item_update(item=free, values={"language": "english!", "domain": "shoes"}) == {
        "language": "'english!' is not a language code such as en, zh or pt-BR"}
    free.refresh_from_db()
    assert free.domain == "appliances"  # nothing half-written
    assert item_update(item=free, values={"simulated_feedback": "Better wording.", "domain": "shoes"}) == {}
    free.refresh_from_db()
    assert (free.simulated_feedback, free.domain) == ("Better wording.", "shoes")
    Assignment.objects.create(campaign=campaign, item=taken, annotator=first)
    judged(done, second)
    for item, reason in ((taken, "is judging"), (done, "judged by 1 annotator")):
        with pytest.raises(ItemLocked, match=reason):
            item_update(item=item, values={"domain": "x"})
        with pytest.raises(ItemLocked, match=reason):
            item_withdraw(item=item)
    item_withdraw(item=free)
    assert list(campaign.items.values_list("pk", flat=True)) == [taken.pk, done.pk]


def test_it_searches_items_by_conversation_text_and_stage(make_campaign, make_items, annotators):
    campaign = make_campaign(annotators_per_item=1)
    leaking, = make_items(campaign, 1)
    broken, = make_items(campaign, 1, conversation=[{"role": "user", "content": "The dryer is broken."}])
    unwritten, = make_items(campaign, 1, human_feedback="")
    judged(broken, annotators(1)[0])
    assert [item.pk for item in items_browse(campaign=campaign, q="DRYER")] == [broken.pk]
    assert [item.pk for item in items_browse(campaign=campaign, stage="complete")] == [broken.pk]
    assert [item.pk for item in items_browse(campaign=campaign, stage="ready")] == [leaking.pk]
    assert [item.pk for item in items_browse(campaign=campaign, stage="needs_feedback")] == [unwritten.pk]


def test_it_lists_the_items_annotators_split_on_with_their_votes(make_campaign, make_items, annotators):
    campaign = make_campaign()
    unanimous, split, alone = make_items(campaign, 3)
    ann, bob, cy = annotators(3)
    for person in (ann, bob):
        judged(unanimous, person)
    judged(split, ann)
    judged(split, bob, relevance="simulated")
    judged(split, cy)
    judged(alone, ann, relevance="simulated")
    rows = disagreements_list(campaign=campaign)
    assert [row["item_id"] for row in rows] == [split.pk]
    relevance = next(c for c in rows[0]["criteria"] if c["label"] == "Relevance")
    assert relevance["split"] and relevance["counts"] == [("human", 2), ("simulated", 1)]
    assert relevance["votes"] == [(ann.username, "human"), (bob.username, "simulated"), (cy.username, "human")]
    assert rows[0]["split"] == 1


def test_it_counts_judgments_per_annotator_and_day_with_quiet_days(make_campaign, make_items, annotators):
    campaign = make_campaign()
    items = make_items(campaign, 3)
    ann, bob = annotators(2)
    monday = datetime(2026, 11, 16, 12, tzinfo=UTC)
    judged(items[0], ann, when=monday)
    judged(items[1], ann, when=monday)
    judged(items[0], bob, when=monday + timedelta(days=2))
    throughput = annotator_throughput(campaign=campaign)
    assert throughput["days"] == ["2026-11-16", "2026-11-17", "2026-11-18"]
    assert throughput["annotators"] == [{"annotator": ann.username, "counts": [2, 0, 0], "total": 2},
                                        {"annotator": bob.username, "counts": [0, 0, 1], "total": 1}]


def test_it_names_the_items_a_pool_as_large_as_n_can_never_finish(make_campaign, make_items, annotators):
    campaign = make_campaign(annotators_per_item=3)
    ann, bob, cy = annotators(3)
    written, = make_items(campaign, 1, human_feedback_author=ann)
    make_items(campaign, 1, human_feedback="")  # whoever writes it drops out of judging it
    judged(written, bob)
    shortfall = campaign_shortfall(campaign=campaign)
    assert shortfall.total == 2 and shortfall.pool == tuple(sorted((ann.username, bob.username, cy.username)))
    first = shortfall.items[0]
    assert (first.item_id, first.judged, first.can_judge, first.writer, first.missing) == (
        written.pk, 1, 2, ann.username, 1)
    assert first.waiting_for == (cy.username,)
    annotators(1)  # a fourth annotator: both can finish
    assert not campaign_shortfall(campaign=campaign)


def test_it_asks_before_closing_and_before_opening_a_campaign_that_cannot_finish(
        client, operator_user, make_campaign, make_items, annotators):
    annotators(2)
    campaign = make_campaign(status=Campaign.Status.DRAFT, annotators_per_item=3)
    make_items(campaign, 2)
    client.force_login(operator_user)
    url = reverse("annotation:campaign_status", args=[campaign.pk])
    asked = client.post(url, {"status": "open"})
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.DRAFT
    assert "cannot finish with the annotators it has" in asked.content.decode()
    client.post(url, {"status": "open", "confirmed": "yes"})
    asked = client.post(url, {"status": "closed"})
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.OPEN and "Annotators stop at once" in asked.content.decode()
    client.post(url, {"status": "closed", "confirmed": "yes"})
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.CLOSED


def test_it_links_the_empty_state_to_the_runs_it_promises_conversations_from(client, operator_user):
    client.force_login(operator_user)
    page = client.get(reverse("annotation:campaign_list")).content.decode()
    assert f'<a href="{reverse("evaluation:run_list")}">evaluation runs</a>' in page


def test_it_edits_an_item_on_its_page_and_refuses_a_judged_one_with_the_reason(
        client, operator_user, make_campaign, make_items, annotators):
    campaign = make_campaign()
    free, done = make_items(campaign, 2)
    judged(done, annotators(1)[0])
    client.force_login(operator_user)
    edit = reverse("annotation:item_edit", args=[campaign.pk, free.pk])
    form = {"simulated_feedback": "Reworded.", "language": "en", "task_format": "LiLo", "domain": "appliances"}
    bad = client.post(edit, form | {"language": "english!"})
    assert bad.status_code == 400 and "is not a language code" in bad.content.decode()
    assert client.post(edit, form).status_code == 302
    free.refresh_from_db()
    assert (free.simulated_feedback, free.task_format) == ("Reworded.", "LiLo")
    refused = client.get(reverse("annotation:item_edit", args=[campaign.pk, done.pk]), follow=True)
    assert f"Not editable: item #{done.pk} has been judged by 1 annotator." in refused.content.decode()
    refused = client.post(reverse("annotation:item_withdraw", args=[campaign.pk, done.pk]), follow=True)
    assert f"Not withdrawn: item #{done.pk} has been judged" in refused.content.decode()
