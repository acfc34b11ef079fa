"""The annotation operations over the JSON API: the roster, skip and flag for annotators on both
stages, the lead's flag list (clear or withdraw), the disagreements with final labels and their
history; and the campaign results counting the lead's final labels in the win rates while
agreement stays on the annotators' votes."""
import pytest
from django.urls import reverse

from annotation.models import Adjudication, Assignment, FeedbackTask, Flag, Item, RosterMember, Skip
from annotation.services import (
    adjudicate,
    assignment_flag,
    assignment_next,
    campaign_results,
    feedback_task_next,
    judgment_submit,
)

API = "/api/annotation"
NOTE = "The human feedback names the warranty; the simulated one does not."


def _as(client, user):
    client.force_login(user)
    return client


def _put(client, url: str, body: dict):
    return client.put(url, body, content_type="application/json")


def _post(client, url: str, body: dict):
    return client.post(url, body, content_type="application/json")


# --- the roster ---
def test_the_roster_is_read_and_replaced_and_whoever_leaves_gives_back_open_work(
        client, make_campaign, make_items, annotators, operator_user):
    campaign = make_campaign(annotators_per_item=2)
    make_items(campaign, 2)
    kept, left = annotators(2)
    open_work = assignment_next(campaign=campaign, annotator=left)
    url = f"{API}/campaigns/{campaign.pk}/roster"
    _as(client, operator_user)
    before = client.get(url).json()
    assert before["open_to_all"] is True and before["members"] == []
    assert {kept.username, left.username} <= set(before["candidates"])

    answer = _put(client, url, {"annotators": [kept.username]})
    assert answer.status_code == 200
    body = answer.json()
    assert (body["open_to_all"], body["released"]) == (False, 1)
    assert [(m["annotator"], m["added_by"]) for m in body["members"]] == [(kept.username, operator_user.username)]
    open_work.refresh_from_db()
    assert open_work.status == Assignment.Status.EXPIRED  # back to the pool, as the page's removal does
    assert assignment_next(campaign=campaign, annotator=left) is None

    assert _put(client, url, {"annotators": []}).json() | {"candidates": None} == {
        "open_to_all": True, "members": [], "candidates": None, "released": 0}


def test_a_roster_naming_someone_who_is_no_workspace_annotator_changes_nothing(
        client, make_campaign, annotators, operator_user):
    campaign = make_campaign()
    member, = annotators(1)
    url = f"{API}/campaigns/{campaign.pk}/roster"
    _as(client, operator_user)
    _put(client, url, {"annotators": [member.username]})
    refused = _put(client, url, {"annotators": ["nobody-here", operator_user.username]})
    assert refused.status_code == 400 and refused.json()["field"] == "annotators"
    assert "nobody-here" in refused.json()["detail"] and operator_user.username in refused.json()["detail"]
    assert list(RosterMember.objects.values_list("annotator__username", flat=True)) == [member.username]
    assert _put(client, url, {"annotators": "x"}).status_code == 422  # not a list: the body's own check


def test_annotators_may_not_touch_a_roster(client, make_campaign, annotator_user):
    campaign = make_campaign()
    _as(client, annotator_user)
    assert client.get(f"{API}/campaigns/{campaign.pk}/roster").status_code == 403
    assert _put(client, f"{API}/campaigns/{campaign.pk}/roster", {"annotators": []}).status_code == 403


# --- skip and flag, for annotators ---
@pytest.fixture
def judging(make_campaign, make_items):
    campaign = make_campaign(annotators_per_item=1)
    make_items(campaign, 2)
    return campaign


def test_a_judge_skips_the_pair_in_hand_and_it_goes_to_someone_else(client, judging, annotators):
    judge, other = annotators(2)
    assignment = assignment_next(campaign=judging, annotator=judge)
    _as(client, other)
    url = f"{API}/assignments/{assignment.token}/skip"
    assert _post(client, url, {}).status_code == 404  # another annotator's token is as unknown as none
    _as(client, judge)
    answer = _post(client, url, {"reason": "not my language"})
    assert answer.status_code == 200 and "another annotator" in answer.json()["detail"]
    assert "human" not in answer.content.decode() and "simulated" not in answer.content.decode()
    skip = Skip.objects.get()
    assert (skip.item_id, skip.annotator, skip.stage, skip.reason) == (assignment.item_id, judge, "judging",
                                                                       "not my language")
    again = _post(client, url, {})
    assert again.status_code == 409 and "no longer yours" in again.json()["detail"]
    assert assignment_next(campaign=judging, annotator=other).item_id == assignment.item_id


@pytest.mark.parametrize("body, field, words", [
    ({}, "reason", "one of broken, offensive, unclear, other"),
    ({"reason": "boring"}, "reason", "choose why you flag this item"),
    ({"reason": "other", "note": "  "}, "note", "say what is wrong"),
    ({"reason": "broken", "note": "x" * 1001}, "note", "longer than 1000"),
])
def test_a_flag_needs_a_reason_from_the_list_and_nothing_is_written_without_one(
        client, judging, annotator_user, body, field, words):
    assignment = assignment_next(campaign=judging, annotator=annotator_user)
    _as(client, annotator_user)
    refused = _post(client, f"{API}/assignments/{assignment.token}/flag", body)
    assert refused.status_code == 400 and refused.json()["field"] == field and words in refused.json()["detail"]
    assignment.refresh_from_db()
    assert assignment.status == Assignment.Status.ASSIGNED and not Flag.objects.exists()


def test_a_flagged_pair_waits_for_the_lead(client, judging, annotators):
    flagger, other = annotators(2)
    assignment = assignment_next(campaign=judging, annotator=flagger)
    _as(client, flagger)
    answer = _post(client, f"{API}/assignments/{assignment.token}/flag", {"reason": "other", "note": "empty reply"})
    assert answer.status_code == 200 and "lead" in answer.json()["detail"]
    flag = Flag.objects.get()
    assert (flag.item_id, flag.stage, flag.reason, flag.note) == (assignment.item_id, "judging", "other", "empty reply")
    assert assignment_next(campaign=judging, annotator=other).item_id != assignment.item_id


def test_writers_skip_and_flag_conversations_by_their_task_tokens(client, make_campaign, make_items, annotators):
    campaign = make_campaign()
    for item in make_items(campaign, 2, human_feedback=""):
        FeedbackTask.objects.create(campaign=campaign, item=item)
    writer, other = annotators(2)
    task = feedback_task_next(campaign=campaign, writer=writer)
    _as(client, other)
    assert _post(client, f"{API}/feedback-tasks/{task.token}/skip", {}).status_code == 404
    _as(client, writer)
    assert _post(client, f"{API}/feedback-tasks/{task.token}/skip", {}).status_code == 200
    task.refresh_from_db()
    assert (task.status, task.writer, Skip.objects.get().stage) == (FeedbackTask.Status.OPEN, None, "writing")

    _as(client, other)
    taken = feedback_task_next(campaign=campaign, writer=other)
    assert taken == task  # the skipped conversation goes to the next writer
    refused = _post(client, f"{API}/feedback-tasks/{taken.token}/flag", {"reason": "nonsense"})
    assert refused.status_code == 400 and refused.json()["field"] == "reason" and not Flag.objects.exists()
    assert _post(client, f"{API}/feedback-tasks/{taken.token}/flag", {"reason": "offensive"}).status_code == 200
    assert (Flag.objects.get().stage, Flag.objects.get().reason) == ("writing", "offensive")


def test_operators_do_not_skip_for_annotators(client, judging, annotator_user, operator_user):
    assignment = assignment_next(campaign=judging, annotator=annotator_user)
    _as(client, operator_user)
    assert _post(client, f"{API}/assignments/{assignment.token}/skip", {}).status_code == 403


# --- the lead's flag list ---
def test_the_lead_lists_flags_clears_one_and_withdraws_another(client, make_campaign, make_items, annotators,
                                                                operator_user):
    campaign = make_campaign(annotators_per_item=1)
    kept, dropped = make_items(campaign, 2)
    first, second = annotators(2)
    for annotator, reason, note in ((first, Flag.Reason.BROKEN, ""), (second, Flag.Reason.OTHER, "<b>odd</b>")):
        assignment = assignment_next(campaign=campaign, annotator=annotator)
        assignment_flag(token=assignment.token, annotator=annotator, reason=reason, note=note)
    by_item = {flag.item_id: flag for flag in Flag.objects.all()}
    assert set(by_item) == {kept.pk, dropped.pk}
    _as(client, operator_user)
    listed = client.get(f"{API}/campaigns/{campaign.pk}/flags").json()
    assert listed["skips"] == 0 and [flag["item_id"] for flag in listed["flags"]] == [f.item_id for f in
                                                                                        Flag.objects.order_by("pk")]
    other = next(flag for flag in listed["flags"] if flag["reason"] == "other")
    assert (other["reason_label"], other["note"], other["flagged_by"], other["stage"], other["withdrawable"]) == (
        "Other", "<b>odd</b>", second.username, "judging", True)

    keep_item = by_item[kept.pk].item_id
    cleared = _post(client, f"{API}/campaigns/{campaign.pk}/items/{keep_item}/clear-flags", {})
    assert cleared.json() == {"item_id": keep_item, "cleared": 1}
    flag = Flag.objects.get(item_id=keep_item)
    assert flag.cleared_by == operator_user and flag.cleared_at is not None
    assert _post(client, f"{API}/campaigns/{campaign.pk}/items/{keep_item}/clear-flags", {}).json()["cleared"] == 0

    withdrawn = client.delete(f"{API}/campaigns/{campaign.pk}/items/{dropped.pk}")
    assert withdrawn.status_code == 204 and not Item.objects.filter(pk=dropped.pk).exists()
    assert client.get(f"{API}/campaigns/{campaign.pk}/flags").json()["flags"] == []


def test_a_judged_item_is_not_withdrawn_and_foreign_ids_are_unknown(client, make_campaign, make_items,
                                                                   annotator_user, operator_user):
    campaign, elsewhere = make_campaign(annotators_per_item=1), make_campaign()
    item, = make_items(campaign, 1)
    assignment = assignment_next(campaign=campaign, annotator=annotator_user)
    judgment_submit(token=assignment.token, annotator=annotator_user,
                    choices={key: "A" for key in campaign.criterion_keys})
    _as(client, operator_user)
    refused = client.delete(f"{API}/campaigns/{campaign.pk}/items/{item.pk}")
    assert refused.status_code == 409 and "judged by 1 annotator" in refused.json()["detail"]
    assert Item.objects.filter(pk=item.pk).exists()
    # An item named under a campaign it is not in, or an id that never was: 404.
    assert client.delete(f"{API}/campaigns/{elsewhere.pk}/items/{item.pk}").status_code == 404
    assert _post(client, f"{API}/campaigns/{campaign.pk}/items/999999/clear-flags", {}).status_code == 404


# --- disagreements and final labels ---
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
    return campaign, item, (first, second)


def test_the_lead_reads_disagreements_and_sets_final_labels_with_a_history(client, disputed, operator_user):
    campaign, item, (first, second) = disputed
    _as(client, operator_user)
    rows = client.get(f"{API}/campaigns/{campaign.pk}/disagreements").json()
    assert [(row["item_id"], row["judgments"], row["split"], row["adjudicated"]) for row in rows] == [
        (item.pk, 2, 3, 0)]
    naturalness = rows[0]["criteria"][0]
    assert naturalness["votes"] == [{"annotator": first.username, "label": "human"},
                                    {"annotator": second.username, "label": "simulated"}]
    assert naturalness["final"] is None

    url = f"{API}/campaigns/{campaign.pk}/items/{item.pk}/adjudications"
    first_look = _post(client, url, {"labels": {"naturalness": "human"}, "note": "first look"})
    assert first_look.status_code == 201
    decided = _post(client, url, {"labels": {"naturalness": "tie", "relevance": "simulated"}, "note": NOTE}).json()
    assert [(d["criterion"], d["label"], d["note"], d["decided_by"]) for d in decided] == [
        ("naturalness", "tie", NOTE, operator_user.username), ("relevance", "simulated", NOTE, operator_user.username)]

    row = client.get(f"{API}/campaigns/{campaign.pk}/disagreements").json()[0]
    assert row["adjudicated"] == 2
    assert [(c["key"], c["final"] and c["final"]["label"]) for c in row["criteria"]] == [
        ("naturalness", "tie"), ("relevance", "simulated"), ("overall_quality", None)]
    history = client.get(f"{API}/campaigns/{campaign.pk}/adjudications").json()
    assert [(h["criterion"], h["label"], h["current"]) for h in history] == [
        ("relevance", "simulated", True), ("naturalness", "tie", True), ("naturalness", "human", False)]
    assert client.get(f"{API}/campaigns/{campaign.pk}/adjudications", {"item_id": 999999}).json() == []


@pytest.mark.parametrize("body, field, words", [
    ({"labels": {"relevance": "A"}, "note": NOTE}, "labels.relevance", "choose one of human, simulated, tie"),
    ({"labels": {"fluency": "human"}, "note": NOTE}, "labels", "no criterion fluency in this campaign"),
    ({"labels": {}, "note": NOTE}, "labels.naturalness", "at least one criterion"),
    ({"labels": {"relevance": "human"}, "note": " "}, "note", "say why"),
])
def test_a_refused_decision_names_its_field_and_stores_nothing(client, disputed, operator_user, body, field, words):
    campaign, item, _ = disputed
    _as(client, operator_user)
    refused = _post(client, f"{API}/campaigns/{campaign.pk}/items/{item.pk}/adjudications", body)
    assert refused.status_code == 400 and refused.json()["field"] == field and words in refused.json()["detail"]
    assert not Adjudication.objects.exists()


def test_an_item_of_another_campaign_is_not_adjudicated_there(client, disputed, make_campaign, operator_user):
    _, item, _ = disputed
    _as(client, operator_user)
    elsewhere = make_campaign()
    answer = _post(client, f"{API}/campaigns/{elsewhere.pk}/items/{item.pk}/adjudications",
                   {"labels": {"relevance": "human"}, "note": NOTE})
    assert answer.status_code == 404 and not Adjudication.objects.exists()


# --- final labels in the results ---
@pytest.fixture
def leaning_human(make_campaign, make_items, annotators):
    """Two items, each judged human-better by two annotators and simulated-better by a third."""
    campaign = make_campaign(annotators_per_item=3)
    first, _ = make_items(campaign, 2)
    for annotator, source in zip(annotators(3), ("human", "human", "simulated")):
        for _ in range(2):
            _vote(campaign, annotator, source)
    return campaign, first


def _figures(campaign) -> dict:
    overall = campaign_results(campaign=campaign)["overall"]
    return {stats["criterion"]: stats for stats in overall}


def test_a_final_label_replaces_the_items_majority_in_the_win_rates_and_leaves_agreement_alone(
        client, leaning_human, operator_user):
    campaign, item = leaning_human
    before = _figures(campaign)
    assert before["naturalness"]["win"]["human"] == 4 and before["naturalness"]["win"]["simulated"] == 2
    assert before["naturalness"]["kappa"] is not None

    adjudicate(item=item, labels={"naturalness": "simulated"}, note=NOTE, decided_by=operator_user)
    after = _figures(campaign)
    # The decided item's three votes count as the lead's label: simulated now wins 4 to 2.
    assert (after["naturalness"]["win"]["simulated"], after["naturalness"]["win"]["human"]) == (4, 2)
    assert after["naturalness"]["adjudicated_items"] == 1
    assert after["relevance"]["win"] == before["relevance"]["win"] and after["relevance"]["adjudicated_items"] == 0
    for key in campaign.criterion_keys:  # agreement is between annotators: the votes as cast
        assert (after[key]["kappa"], after[key]["alpha"], after[key]["kappa_interval"]) == (
            before[key]["kappa"], before[key]["alpha"], before[key]["kappa_interval"])
    results = campaign_results(campaign=campaign)
    assert results["adjudicated_items"] == 1
    group = results["breakdowns"][0]["groups"][0]["criteria"][0]
    assert (group["criterion"], group["win"]["simulated"]) == ("naturalness", 4)

    _as(client, operator_user)
    assert client.get(f"{API}/campaigns/{campaign.pk}/results").json()["adjudicated_items"] == 1
    page = client.get(reverse("annotation:campaign_results", args=[campaign.pk])).content.decode()
    assert "1 item decided by adjudication" in page
    assert "Agreement (κ, α) is between annotators, so it always reads their own votes" in page


def test_without_adjudication_the_page_says_the_votes_count_as_cast(client, leaning_human, operator_user):
    campaign, _ = leaning_human
    _as(client, operator_user)
    page = client.get(reverse("annotation:campaign_results", args=[campaign.pk])).content.decode()
    assert "No item decided by adjudication" in page
