"""Quality control: attention checks (warn, exclude, operator reversal), balanced
sides, the max-disagreement strategy, intervals and annotator quality in the results."""
from collections import Counter

import pytest

from annotation.models import Assignment, Campaign, Participant
from annotation.services import (
    assignment_next,
    campaign_results,
    judgment_submit,
    participant_decide,
    split_item_ids,
)

CHECK = {"naturalness": "human", "relevance": "human", "overall_quality": "human"}


def _answer(assignment, source: str):
    """Pick `source` (human/simulated) on every criterion, whatever side it is on."""
    side = "A" if assignment.source_of("A") == source else "B"
    judgment_submit(token=assignment.token, annotator=assignment.annotator,
                    choices={key: side for key in assignment.campaign.criterion_keys})


def _work(campaign, person, *, check_answer: str, item_answer: str = "simulated", limit: int = 50) -> list:
    given = []
    for _ in range(limit):
        assignment = assignment_next(campaign=campaign, annotator=person)
        if assignment is None:
            break
        _answer(assignment, check_answer if assignment.item.is_attention else item_answer)
        given.append(assignment)
    return given


@pytest.fixture
def checked_campaign(make_campaign, make_items):
    campaign = make_campaign(annotators_per_item=2, attention_rate=0.25, attention_warn_below=0.8,
                             attention_exclude_below=0.5, attention_min_checks=2)
    make_items(campaign, 12)
    make_items(campaign, 4, is_attention=True, gold_expected=CHECK, simulated_feedback="")
    return campaign


def test_it_injects_attention_checks_at_the_campaign_rate(checked_campaign, annotators):
    given = _work(checked_campaign, annotators(1)[0], check_answer="human")
    checks = [assignment.item.is_attention for assignment in given]
    assert len(given) == 16 and sum(checks) == 4  # all 12 items, and the rate's share of checks
    assert checks[:4] == [False, False, False, True]  # spread out, not all at the start


def test_it_excludes_a_careless_annotator_then_the_operator_reinstates_them(checked_campaign, annotators):
    careful, careless, other = annotators(3)
    _work(checked_campaign, careless, check_answer="simulated", limit=8)
    standing = Participant.objects.get(campaign=checked_campaign, annotator=careless)
    assert standing.standing == Participant.Standing.EXCLUDED and standing.attention_total == 2
    assert assignment_next(campaign=checked_campaign, annotator=careless) is None  # no more work
    _work(checked_campaign, careful, check_answer="human")
    _work(checked_campaign, other, check_answer="human")
    results = campaign_results(campaign=checked_campaign)
    people = {row["annotator"]: row for row in results["annotators"]}
    assert people[careless.username]["standing"] == "excluded" and results["excluded"] == 1
    assert results["overall"][0]["win"]["total"] == 24  # the two careful annotators' 12 items each
    assert Assignment.objects.filter(annotator=careless, status="completed").count() == 8  # kept, only marked

    participant_decide(campaign=checked_campaign, annotator=careless, decision="include")
    results = campaign_results(campaign=checked_campaign)
    assert results["excluded"] == 0 and results["overall"][0]["win"]["total"] == 24 + 6
    participant_decide(campaign=checked_campaign, annotator=careless, decision="auto")
    assert Participant.objects.get(annotator=careless).standing == Participant.Standing.EXCLUDED


def test_it_warns_before_it_excludes(checked_campaign, annotators):
    person = annotators(1)[0]
    given = _work(checked_campaign, person, check_answer="simulated", limit=4)
    assert given[-1].item.is_attention
    participant = Participant.objects.get(annotator=person)
    # One check failed, below the minimum of two for exclusion: a warning only.
    assert (participant.standing, participant.attention_total) == (Participant.Standing.WARNED, 1)


def test_it_balances_each_items_sides_across_its_annotators(make_campaign, make_items, annotators):
    campaign = make_campaign(annotators_per_item=3)
    make_items(campaign, 20)
    for person in annotators(6):
        _work(campaign, person, check_answer="human")
    for item in campaign.items.all():
        sides = list(item.assignments.values_list("side_a_is_human", flat=True))
        assert len(sides) == 3 and 1 <= sum(sides) <= 2  # never all on one side


def test_it_gives_split_items_extra_annotators_up_to_the_cap(make_campaign, make_items, annotators):
    campaign = make_campaign(annotators_per_item=2, assignment_strategy=Campaign.Strategy.MAX_DISAGREEMENT,
                             max_annotators_per_item=4)
    split, agreed = make_items(campaign, 2)
    people = annotators(5)
    for index, person in enumerate(people[:2]):
        for _ in range(2):
            assignment = assignment_next(campaign=campaign, annotator=person)
            split_vote = assignment.item == split and index == 1
            _answer(assignment, "human" if split_vote else "simulated")
    assert split_item_ids(campaign=campaign) == [split.pk]
    extra = [assignment_next(campaign=campaign, annotator=person) for person in people[2:]]
    assert [assignment.item for assignment in extra[:2]] == [split, split] and extra[2] is None
    assert agreed.assignments.count() == 2


def test_it_keeps_least_annotated_at_n(make_campaign, make_items, annotators):
    campaign = make_campaign(annotators_per_item=2)
    make_items(campaign, 1)
    people = annotators(3)
    first, second = (assignment_next(campaign=campaign, annotator=person) for person in people[:2])
    _answer(first, "human")
    _answer(second, "simulated")
    assert assignment_next(campaign=campaign, annotator=people[2]) is None


def test_it_reports_intervals_alpha_position_bias_and_competence(make_campaign, make_items, annotators):
    campaign = make_campaign(annotators_per_item=3)
    make_items(campaign, 10)
    make_items(campaign, 1, is_gold=True, gold_expected={"naturalness": "human"})
    people = annotators(4)
    for person in people[:3]:
        _work(campaign, person, check_answer="human", item_answer="human")
    results = campaign_results(campaign=campaign)
    naturalness = results["overall"][0]
    assert naturalness["kappa"] is None and naturalness["alpha"] is None  # unanimous: undefined
    assert naturalness["kappa_interval"]["n"] == 10 and "alpha_interval" in naturalness
    share = results["position"][0]["share_a"]
    assert share["n"] == 30 and share["low"] < share["value"] < share["high"]
    row = results["annotators"][0]
    assert (row["gold_correct"], row["gold_total"]) == (1, 1)
    assert {"competence", "side_a_share", "spam_reasons", "standing"} <= set(row)


def always_a_campaign(make_campaign, make_items, annotators) -> tuple:
    """A 30-item campaign judged by two careful annotators and a third who always answers side A."""
    campaign = make_campaign(annotators_per_item=3)
    make_items(campaign, 30)
    people = annotators(3)
    for person in people[:2]:
        _work(campaign, person, check_answer="human", item_answer="human")
    while (assignment := assignment_next(campaign=campaign, annotator=people[2])) is not None:
        judgment_submit(token=assignment.token, annotator=people[2],
                        choices={key: "A" for key in campaign.criterion_keys})
    return campaign, people


def test_it_flags_an_always_a_annotator(make_campaign, make_items, annotators):
    campaign, people = always_a_campaign(make_campaign, make_items, annotators)
    rows = {row["annotator"]: row for row in campaign_results(campaign=campaign)["annotators"]}
    assert rows[people[2].username]["side_a_share"] == 1.0 and rows[people[2].username]["spam_reasons"]
    assert Counter(bool(rows[p.username]["spam_reasons"]) for p in people[:2]) == Counter({False: 2})


def test_it_pairs_simulated_scores_with_peoples_majority_for_the_refit(make_campaign, make_items, annotators):
    from annotation.services import campaign_action_fit, campaign_action_pairs, conversations_compared
    campaign = make_campaign(annotators_per_item=3)
    liked, split = make_items(campaign, 1, simulated_score=9, simulated_action="like",
                              simulated_like_probability=0.8)[0], make_items(campaign, 1, simulated_score=4)[0]
    people = annotators(3)
    ratings = {liked: [(9, "like"), (8, "like"), (5, "none")], split: [(4, "like"), (3, "dislike"), (5, "none")]}
    for item, rated in ratings.items():
        for person, (score, action) in zip(people, rated):
            assignment = Assignment.objects.create(campaign=campaign, item=item, annotator=person)
            judgment_submit(token=assignment.token, annotator=person, score=score, action=action,
                            choices={key: "A" for key in campaign.criterion_keys})
    participant_decide(campaign=campaign, annotator=people[2], decision="exclude")
    compared = {c.simulated_score: c.human for c in conversations_compared(campaign=campaign)}
    assert compared == {9: ((9, "like"), (8, "like")), 4: ((4, "like"), (3, "dislike"))}  # excluded person left out
    assert campaign_action_pairs(campaign=campaign) == [(9, "like")]  # no strict majority on the split item
    fit = campaign_action_fit(campaign=campaign)
    assert fit.n == 1 and set(fit.params) == {"s0_like", "k_like", "like_rate", "s0_dislike", "k_dislike",
                                              "dislike_rate", "distribution"}
    assert campaign_results(campaign=campaign)["fidelity"]["conversations"] == 2


def test_it_offers_only_campaigns_with_pairs_for_the_refit(make_campaign, make_items, annotators):
    from annotation.services import campaign_find, campaigns_with_action_pairs
    rated, unrated, unscored = make_campaign(), make_campaign(), make_campaign()
    make_items(unrated, 1, simulated_score=7)
    make_items(unscored, 1)
    item = make_items(rated, 1, simulated_score=8)[0]
    person = annotators(1)[0]
    assignment = Assignment.objects.create(campaign=rated, item=item, annotator=person)
    judgment_submit(token=assignment.token, annotator=person, score=8, action="like",
                    choices={key: "A" for key in rated.criterion_keys})
    assert campaigns_with_action_pairs(workspace=rated.workspace) == [(rated, 1)]
    found = lambda pk: campaign_find(campaign_id=pk, workspace=rated.workspace)  # noqa: E731
    assert found(unrated.pk) == unrated and found(0) is None
