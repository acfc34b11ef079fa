"""Results: kappa over complete items, win rates, breakdowns, annotators, sampling, exports."""
import csv
import io
import json

import pytest

from annotation.models import Assignment
from annotation.services import campaign_results, judgment_records, judgment_submit, records_render, result_records

CRITERIA = ("naturalness", "relevance", "overall_quality")


def _judge(item, annotator, naturalness: str, *, side_a_is_human: bool, time_ms: int = 1000, comment: str = ""):
    """Judge so the resolved preference is `naturalness` (others: simulated), whatever side it sits on."""
    assignment = Assignment.objects.create(campaign=item.campaign, item=item, annotator=annotator,
                                           side_a_is_human=side_a_is_human)
    side = {True: {"human": "A", "simulated": "B"}, False: {"human": "B", "simulated": "A"}}[side_a_is_human]
    choices = {"naturalness": side[naturalness], "relevance": side["simulated"],
               "overall_quality": side["simulated"]}
    judgment_submit(token=assignment.token, annotator=annotator, choices=choices, comment=comment,
                    time_spent_ms=time_ms)


@pytest.fixture
def study(make_campaign, make_items, annotators):
    campaign = make_campaign(annotators_per_item=3)
    i1, i2 = make_items(campaign, 1)[0], make_items(campaign, 1, task_format="LiLo", domain="clothing")[0]
    i3 = make_items(campaign, 1, language="zh")[0]
    partial = make_items(campaign, 1)[0]
    gold = make_items(campaign, 1, is_gold=True, gold_expected={"naturalness": "human"})[0]
    a, b, c = annotators(3)
    votes = {i1: ("simulated",) * 3, i2: ("simulated", "human", "human"), i3: ("human",) * 3}
    for item, labels in votes.items():
        for index, (person, label) in enumerate(zip((a, b, c), labels)):
            _judge(item, person, label, side_a_is_human=index % 2 == 0, time_ms=1000 * (index + 1))
    _judge(partial, a, "simulated", side_a_is_human=False, time_ms=5000, comment="=HYPERLINK(1)")
    _judge(gold, a, "human", side_a_is_human=True)
    _judge(gold, b, "simulated", side_a_is_human=True)
    return campaign, (a, b, c)


def test_it_computes_kappa_over_complete_items_and_win_rates_over_all(study):
    campaign, _ = study
    overall = {stats["criterion"]: stats for stats in campaign_results(campaign=campaign)["overall"]}
    naturalness = overall["naturalness"]
    # Complete items give the hand-computed table [[0,3],[2,1],[3,0]]: kappa = 22/40.
    assert naturalness["kappa"] == pytest.approx(0.55) and naturalness["kappa_items"] == 3
    win = naturalness["win"]
    assert (win["total"], win["simulated"], win["human"], win["ties"]) == (10, 5, 5, 0)
    assert win["simulated_vs_human"] == pytest.approx(0.5)
    assert overall["relevance"]["kappa"] is None  # every rating "simulated": kappa undefined
    assert overall["relevance"]["win"]["simulated_rate"] == pytest.approx(1.0)


def test_it_breaks_results_down_by_language_format_and_domain(study):
    campaign, _ = study
    breakdowns = {entry["field"]: entry["groups"] for entry in campaign_results(campaign=campaign)["breakdowns"]}
    languages = {group["group"]: group["criteria"][0] for group in breakdowns["language"]}
    assert set(languages) == {"en", "zh"}
    assert languages["zh"]["win"]["human"] == 3 and languages["zh"]["kappa"] is None
    assert languages["en"]["kappa_items"] == 2 and languages["en"]["win"]["total"] == 7
    formats = {group["group"]: group["criteria"][0]["win"]["total"] for group in breakdowns["task_format"]}
    assert formats == {"LiLo": 3, "SiSo": 7}
    domains = {group["group"] for group in breakdowns["domain"]}
    assert domains == {"appliances", "clothing"}


def test_it_scores_annotators_against_the_majority_gold_and_speed(study):
    campaign, (a, b, c) = study
    people = {row["annotator"]: row for row in campaign_results(campaign=campaign)["annotators"]}
    # a dissented on item 2's naturalness only: 8 of 9 criterion votes agree with the majority.
    assert (people[a.username]["agreed"], people[a.username]["compared"]) == (8, 9)
    assert (people[b.username]["agreed"], people[b.username]["compared"]) == (9, 9)
    assert (people[a.username]["gold_correct"], people[a.username]["gold_total"]) == (1, 1)
    assert (people[b.username]["gold_correct"], people[b.username]["gold_total"]) == (0, 1)
    assert people[a.username]["judgments"] == 5 and people[a.username]["median_seconds"] == 1.0
    assert people[c.username]["median_seconds"] == 3.0


def test_it_tabulates_the_sample_without_gold_items(study):
    campaign, _ = study
    sampling = campaign_results(campaign=campaign)["sampling"]
    assert sampling["total"] == 4
    by = {entry["field"]: dict(entry["counts"]) for entry in sampling["by"]}
    assert by["language"] == {"en": 3, "zh": 1} and by["domain"] == {"appliances": 3, "clothing": 1}
    cross = {row["language"]: dict(zip(sampling["language_by_format"]["formats"], row["counts"]))
             for row in sampling["language_by_format"]["rows"]}
    assert cross["en"]["SiSo"] == 2 and cross["en"]["LiLo"] == 1 and cross["zh"]["SiSo"] == 1


def test_it_exports_judgments_as_csv_with_formula_cells_defused(study):
    campaign, _ = study
    rows = list(csv.DictReader(io.StringIO(records_render(judgment_records(campaign=campaign), "csv"))))
    assert len(rows) == 12
    assert {"naturalness_choice", "naturalness_preferred", "side_a", "time_spent_ms"} <= set(rows[0])
    assert any(row["comment"] == "'=HYPERLINK(1)" for row in rows)
    for row in rows:
        assert row["naturalness_preferred"] == (row["side_a"] if row["naturalness_choice"] == "A"
                                                else {"human": "simulated", "simulated": "human"}[row["side_a"]])


def test_it_exports_results_as_jsonl(study):
    campaign, _ = study
    lines = [json.loads(line) for line in records_render(result_records(campaign=campaign), "jsonl").splitlines()]
    overall = [line for line in lines if line["scope"] == "overall"]
    assert [line["criterion"] for line in overall] == list(CRITERIA)
    assert overall[0]["kappa"] == pytest.approx(0.55)
    assert {line["scope"] for line in lines} == {"overall", "language", "task_format", "domain"}
