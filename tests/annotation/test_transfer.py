"""Lossless campaign export/import: a round trip keeps every field; any bad line stores nothing."""
import json

import pytest

from annotation.models import Assignment, Campaign, FeedbackTask, Item, Judgment, Participant
from annotation.services import (
    assignment_next,
    campaign_export_lines,
    campaign_export_render,
    campaign_import,
    feedback_task_next,
    feedback_task_submit,
    judgment_submit,
    participant_decide,
)


@pytest.fixture
def full_campaign(make_campaign, make_items, annotators):
    campaign = make_campaign(annotators_per_item=2, attention_rate=0.3, allow_ties=True,
                             assignment_strategy=Campaign.Strategy.MAX_DISAGREEMENT, max_annotators_per_item=3)
    make_items(campaign, 3, simulated_score=8, simulated_action="like", simulated_like_probability=0.42)
    make_items(campaign, 1, is_gold=True, gold_expected={"naturalness": "tie"}, source_ref="gold-1")
    make_items(campaign, 1, is_attention=True, gold_expected={"naturalness": "human"})
    make_items(campaign, 1, human_feedback="")
    FeedbackTask.objects.create(item=campaign.items.get(human_feedback=""), campaign=campaign)
    people = annotators(3)
    task = feedback_task_next(campaign=campaign, writer=people[0])
    feedback_task_submit(token=task.token, writer=people[0], text="Ünïcode feedback ✓", score=3, action="dislike")
    for person in people[1:]:
        for _ in range(3):
            assignment = assignment_next(campaign=campaign, annotator=person)
            judgment_submit(token=assignment.token, annotator=person, comment="why\nnot",
                            choices={key: "A" for key in campaign.criterion_keys}, score=6, action="none")
    assignment_next(campaign=campaign, annotator=people[0])  # one left open
    participant_decide(campaign=campaign, annotator=people[1], decision="exclude")
    return campaign


def test_it_round_trips_every_field(full_campaign):
    exported = campaign_export_render(campaign=full_campaign)
    kinds = {json.loads(line)["kind"] for line in exported.splitlines()}
    assert kinds == {"campaign", "item", "feedback_task", "assignment", "judgment", "participant"}
    counts = [model.objects.count() for model in (Item, FeedbackTask, Assignment, Judgment, Participant)]
    full_campaign.delete()
    report, campaign = campaign_import(text=exported)
    assert report.ok, report.problems
    assert report.created == len(exported.splitlines())
    assert campaign_export_render(campaign=campaign) == exported  # every field, in the same order
    assert [model.objects.count() for model in (Item, FeedbackTask, Assignment, Judgment, Participant)] == counts


def test_it_imports_under_a_new_name_only_when_tokens_are_free(full_campaign):
    exported = campaign_export_render(campaign=full_campaign)
    report, campaign = campaign_import(text=exported)
    assert campaign is None
    problems = {(problem.field, problem.reason.split(" ")[0]) for problem in report.problems}
    assert ("name", "a") in problems and ("token", "already") in problems
    assert Campaign.objects.count() == 1


def test_it_reports_every_bad_line_and_stores_nothing(full_campaign):
    lines = campaign_export_lines(campaign=full_campaign)
    full_campaign.delete()
    lines[1]["simulated_score"] = 11
    lines[2]["colour"] = "red"
    judgment = next(index for index, line in enumerate(lines) if line["kind"] == "judgment")
    lines[judgment]["assignment"] = 999
    text = "\n".join(json.dumps(line) for line in lines) + "\nnot json\n"
    report, campaign = campaign_import(text=text)
    assert campaign is None and not report.ok
    found = {(problem.row, problem.field) for problem in report.problems}
    assert {(2, "simulated_score"), (3, "colour"), (judgment + 1, "assignment"), (len(lines) + 1, "(line)")} <= found
    assert not Campaign.objects.exists() and not Item.objects.exists()


def test_it_refuses_a_file_that_does_not_start_with_the_campaign(db):
    report, campaign = campaign_import(text=json.dumps({"kind": "item", "ref": 1}) + "\n")
    assert campaign is None and report.problems[0].field == "kind"
    report, _ = campaign_import(text="")
    assert report.problems[0].field == "file"
