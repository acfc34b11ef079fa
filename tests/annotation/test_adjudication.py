"""The lead settles a disagreement: a final label per criterion with a note, kept with who and when,
shown with the disagreement and in the results, exported per item, and never shown to judges."""
import csv
import io
import json

import pytest
from django.urls import reverse

from annotation.models import Adjudication
from annotation.services import (
    AdjudicationError,
    adjudicate,
    assignment_next,
    campaign_export_render,
    campaign_import,
    final_label_records,
    judgment_records,
    judgment_submit,
    records_render,
)

NOTE = "Both wrote fine feedback; the human one names the warranty."


def _vote(campaign, annotator, source: str):
    """Judge the next item preferring `source` (human or simulated) on every criterion."""
    assignment = assignment_next(campaign=campaign, annotator=annotator)
    side = "A" if (assignment.side_a_is_human == (source == "human")) else "B"
    judgment_submit(token=assignment.token, annotator=annotator, choices={key: side for key in campaign.criterion_keys})
    return assignment


@pytest.fixture
def disputed(make_campaign, make_items, annotators):
    """One item judged human-better by one annotator and simulated-better by the other."""
    campaign = make_campaign(annotators_per_item=2)
    make_items(campaign, 1)
    first, second = annotators(2)
    item = _vote(campaign, first, "human").item
    _vote(campaign, second, "simulated")
    return campaign, item


def test_the_latest_decision_is_final_and_earlier_ones_stay(disputed, operator_user):
    campaign, item = disputed
    adjudicate(item=item, labels={"naturalness": "human"}, note="first look", decided_by=operator_user)
    adjudicate(item=item, labels={"naturalness": "tie", "relevance": "simulated"}, note=NOTE, decided_by=operator_user)
    assert Adjudication.objects.filter(criterion="naturalness").count() == 2
    record = final_label_records(campaign=campaign)[0]
    assert (record["naturalness_final"], record["naturalness_note"], record["naturalness_adjudicated"]) == (
        "tie", NOTE, True)
    assert record["naturalness_decided_by"] == operator_user.username
    assert record["relevance_final"] == "simulated"
    # Unsettled and split: no majority, so no final label either.
    assert (record["overall_quality_majority"], record["overall_quality_final"]) == ("", "")


@pytest.mark.parametrize("labels, note, field", [
    ({}, NOTE, "naturalness"),
    ({"relevance": "A"}, NOTE, "relevance"),
    ({"relevance": "human"}, "  ", "note"),
])
def test_it_refuses_a_decision_without_a_label_a_known_label_or_a_note(disputed, operator_user, labels, note, field):
    _, item = disputed
    with pytest.raises(AdjudicationError) as refused:
        adjudicate(item=item, labels=labels, note=note, decided_by=operator_user)
    assert refused.value.field == field
    assert not Adjudication.objects.exists()


def test_gold_items_are_not_adjudicated(make_campaign, make_items, operator_user):
    gold = make_items(make_campaign(), 1, is_gold=True, gold_expected={"naturalness": "human"})[0]
    with pytest.raises(AdjudicationError, match="gold"):
        adjudicate(item=gold, labels={"naturalness": "human"}, note=NOTE, decided_by=operator_user)


def test_the_disagreements_page_sets_and_shows_the_final_label(client, disputed, operator_user):
    campaign, item = disputed
    client.force_login(operator_user)
    url = reverse("annotation:campaign_disagreements", args=[campaign.pk])
    assert "not set" in client.get(url).content.decode()
    answer = client.post(reverse("annotation:item_adjudicate", args=[campaign.pk, item.pk]) + "?page=1",
                         {"final_naturalness": "human", "final_relevance": "", "note": NOTE})
    assert answer.status_code == 302 and answer["Location"] == f"{url}?page=1#split-{item.pk}"
    decision = Adjudication.objects.get()
    assert (decision.label, decision.decided_by, decision.note) == ("human", operator_user, NOTE)
    page = client.get(url).content.decode()
    assert f"by {operator_user.username}" in page and NOTE in page and "settled 1 of 3" in page


def test_the_note_is_shown_as_text(client, disputed, operator_user):
    campaign, item = disputed
    adjudicate(item=item, labels={"relevance": "tie"}, note="<script>alert(1)</script>", decided_by=operator_user)
    client.force_login(operator_user)
    page = client.get(reverse("annotation:campaign_disagreements", args=[campaign.pk])).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page


def test_the_disagreements_page_shows_a_refused_decision_at_its_field(client, disputed, operator_user):
    campaign, item = disputed
    client.force_login(operator_user)
    answer = client.post(reverse("annotation:item_adjudicate", args=[campaign.pk, item.pk]),
                         {"final_naturalness": "tie", "note": ""})
    page = answer.content.decode()
    assert answer.status_code == 400 and not Adjudication.objects.exists()
    assert f"Item #{item.pk}: not saved. The note: say why" in page  # the summary
    assert 'aria-invalid="true">' in page and '<option value="tie" selected>' in page  # the field, values kept


def test_results_count_and_exports_carry_the_final_labels(client, disputed, operator_user):
    campaign, item = disputed
    adjudicate(item=item, labels={"overall_quality": "simulated"}, note=NOTE, decided_by=operator_user)
    client.force_login(operator_user)
    results = client.get(reverse("annotation:campaign_results", args=[campaign.pk])).content.decode()
    assert "The lead settled 1 disputed item" in results
    labels = client.get(reverse("annotation:campaign_export", args=[campaign.pk, "labels", "csv"]))
    rows = list(csv.DictReader(io.StringIO(labels.content.decode())))
    assert [(row["item_id"], row["overall_quality_final"], row["overall_quality_note"]) for row in rows] == [
        (str(item.pk), "simulated", NOTE)]
    lines = client.get(reverse("annotation:campaign_export", args=[campaign.pk, "labels", "jsonl"])).content
    assert json.loads(lines.splitlines()[0])["overall_quality_adjudicated"] is True
    judgments = list(csv.DictReader(io.StringIO(records_render(judgment_records(campaign=campaign), "csv"))))
    assert {row["overall_quality_final"] for row in judgments} == {"simulated"}
    assert {row["naturalness_final"] for row in judgments} == {""}


def test_the_campaign_file_keeps_adjudications(disputed, operator_user):
    campaign, item = disputed
    adjudicate(item=item, labels={"relevance": "tie"}, note=NOTE, decided_by=operator_user)
    exported = campaign_export_render(campaign=campaign)
    assert '"kind": "adjudication"' in exported
    campaign.delete()
    report, copy = campaign_import(text=exported)
    assert report.ok, report.problems
    decision = Adjudication.objects.get()
    assert (decision.campaign, decision.label, decision.note, decision.decided_by) == (copy, "tie", NOTE, operator_user)
    assert campaign_export_render(campaign=copy) == exported


def test_judges_never_see_a_final_label(client, make_campaign, make_items, annotators, operator_user):
    campaign = make_campaign(annotators_per_item=3)
    make_items(campaign, 1)
    first, second, third = annotators(3)
    item = _vote(campaign, first, "human").item
    _vote(campaign, second, "simulated")
    adjudicate(item=item, labels={"naturalness": "human"}, note=NOTE, decided_by=operator_user)
    assignment = assignment_next(campaign=campaign, annotator=third)
    client.force_login(third)
    page = client.get(reverse("annotation:judge", args=[assignment.token])).content.decode()
    assert NOTE not in page and "simulated" not in page.lower() and "final label" not in page.lower()
    assert client.get(reverse("annotation:campaign_disagreements", args=[campaign.pk])).status_code == 403
