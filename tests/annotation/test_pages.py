"""Annotation pages: roles, campaign management, uploads, judging and writing."""
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.models import Assignment, Campaign, FeedbackTask, Item, Judgment, Participant
from annotation.services import assignment_next, items_from_conversations
from memweb.roles import Role
from tests.annotation.conftest import item_fields

CHOICES = {"criterion_naturalness": "A", "criterion_relevance": "B", "criterion_overall_quality": "A"}


@pytest.fixture
def campaign(make_campaign, make_items):
    campaign = make_campaign(instructions="Compare **carefully**.\n\n<script>alert('owned')</script>")
    make_items(campaign, 3)
    return campaign


def _operator_urls(campaign):
    return [
        reverse("annotation:campaign_list"), reverse("annotation:campaign_create"),
        reverse("annotation:campaign_detail", args=[campaign.pk]),
        reverse("annotation:campaign_edit", args=[campaign.pk]),
        reverse("annotation:campaign_progress", args=[campaign.pk]),
        reverse("annotation:campaign_results", args=[campaign.pk]),
        reverse("annotation:campaign_export", args=[campaign.pk, "judgments", "csv"]),
        reverse("annotation:campaign_export", args=[campaign.pk, "results", "jsonl"]),
    ]


@pytest.mark.parametrize("role, allowed", [(Role.OPERATOR, True), (Role.ADMIN, True), (Role.ANNOTATOR, False),
                                           (Role.REVIEWER, False)])
def test_it_shows_campaigns_and_results_only_to_operators(client, campaign, user_for_role, role, allowed):
    client.force_login(user_for_role(role))
    for url in _operator_urls(campaign):
        assert client.get(url).status_code == (200 if allowed else 403), url


@pytest.mark.parametrize("role, allowed", [(Role.ANNOTATOR, True), (Role.ADMIN, True), (Role.OPERATOR, False),
                                           (Role.REVIEWER, False)])
def test_it_shows_the_queue_only_to_annotators(client, campaign, user_for_role, role, allowed):
    client.force_login(user_for_role(role))
    assert client.get(reverse("annotation:queue")).status_code == (200 if allowed else 403)
    answer = client.post(reverse("annotation:judge_next", args=[campaign.pk]))
    assert answer.status_code == (302 if allowed else 403)


def test_it_sends_anonymous_visitors_to_sign_in(client, campaign):
    for url in [*_operator_urls(campaign), reverse("annotation:queue")]:
        answer = client.get(url)
        assert answer.status_code == 302 and reverse("login") in answer["Location"], url


def test_it_sends_each_role_to_its_own_start_page(client, operator_user, annotator_user):
    client.force_login(operator_user)
    assert client.get(reverse("annotation:index"))["Location"] == reverse("annotation:campaign_list")
    client.force_login(annotator_user)
    assert client.get(reverse("annotation:index"))["Location"] == reverse("annotation:queue")


def test_it_creates_a_campaign_with_default_criteria_and_edits_them(client, operator_user):
    client.force_login(operator_user)
    form = client.get(reverse("annotation:campaign_create")).content.decode()
    assert "Naturalness: Which feedback reads more like" in form
    answer = client.post(reverse("annotation:campaign_create"), {
        "name": "Pilot", "instructions": "Be fair.", "criteria_text": "Helpfulness: more useful\nTone: politer",
        "annotators_per_item": 3, "assignment_timeout_minutes": 20})
    campaign = Campaign.objects.get(name="Pilot")
    assert answer.status_code == 302 and campaign.status == Campaign.Status.DRAFT
    assert campaign.criterion_keys == ["helpfulness", "tone"] and campaign.created_by == operator_user


def test_it_names_the_bad_field_when_creating_a_campaign(client, operator_user):
    client.force_login(operator_user)
    answer = client.post(reverse("annotation:campaign_create"), {
        "name": "", "criteria_text": "Tone: a\nTone: b", "annotators_per_item": 0, "assignment_timeout_minutes": 5})
    assert answer.status_code == 400
    errors = answer.context["form"].errors
    assert {"name", "criteria_text", "annotators_per_item"} <= set(errors)
    assert "share a key" in errors["criteria_text"][0]
    assert not Campaign.objects.exists()


def test_it_freezes_criteria_once_someone_has_judged(client, campaign, operator_user, annotator_user):
    assignment = assignment_next(campaign=campaign, annotator=annotator_user)
    Judgment.objects.create(assignment=assignment, choices={}, preferences={})
    client.force_login(operator_user)
    answer = client.post(reverse("annotation:campaign_edit", args=[campaign.pk]), {
        "name": "Renamed", "criteria_text": "Only: one", "annotators_per_item": 5, "assignment_timeout_minutes": 30})
    assert answer.status_code == 302
    campaign.refresh_from_db()
    assert campaign.name == "Renamed" and campaign.annotators_per_item == 3
    assert campaign.criterion_keys == ["naturalness", "relevance", "overall_quality"]


def test_it_filters_searches_and_pages_the_campaign_list(client, make_campaign, operator_user):
    for number in range(23):
        make_campaign(name=f"Batch {number:02d}", status=Campaign.Status.DRAFT)
    make_campaign(name="Closed one", status=Campaign.Status.CLOSED)
    client.force_login(operator_user)
    first = client.get(reverse("annotation:campaign_list"), {"status": "draft"})
    assert len(first.context["page"].object_list) == 20
    second = client.get(reverse("annotation:campaign_list"), {"status": "draft", "page": 2})
    assert len(second.context["page"].object_list) == 3 and "status=draft" in second.context["query"]
    partial = client.get(reverse("annotation:campaign_list"), {"q": "closed"}, HTTP_HX_REQUEST="true")
    assert [c.name for c in partial.context["page"].object_list] == ["Closed one"]
    assert "<html" not in partial.content.decode()


def test_it_opens_and_closes_a_campaign(client, make_campaign, make_items, operator_user):
    campaign = make_campaign(status=Campaign.Status.DRAFT)
    client.force_login(operator_user)
    url = reverse("annotation:campaign_status", args=[campaign.pk])
    client.post(url, {"status": "open"})
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.DRAFT  # no items yet
    make_items(campaign, 1)
    client.post(url, {"status": "open", "confirmed": "yes"})  # confirmed: no annotator exists yet
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.OPEN
    client.post(url, {"status": "closed", "confirmed": "yes"})
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.CLOSED


def test_it_shows_the_validation_report_and_stores_nothing(client, campaign, operator_user):
    client.force_login(operator_user)
    bad = "\n".join([json.dumps(item_fields()), json.dumps(item_fields(language="", task_format="XXL"))])
    answer = client.post(reverse("annotation:campaign_upload", args=[campaign.pk]),
                         {"file": SimpleUploadedFile("items.jsonl", bad.encode())})
    page = answer.content.decode()
    assert answer.status_code == 400 and "Nothing was imported" in page
    assert "<strong>row 2</strong>: missing field <code>language</code>; <code>task_format</code>" in page
    assert campaign.items.count() == 3
    good = SimpleUploadedFile("items.jsonl", json.dumps(item_fields(human_feedback="")).encode())
    answer = client.post(reverse("annotation:campaign_upload", args=[campaign.pk]), {"file": good})
    assert answer.status_code == 302 and campaign.items.count() == 4


def test_it_renders_instructions_as_sanitised_markdown(client, campaign, operator_user, annotator_user):
    client.force_login(operator_user)
    detail = client.get(reverse("annotation:campaign_detail", args=[campaign.pk])).content.decode()
    assert "<strong>carefully</strong>" in detail and "alert(" not in detail
    client.force_login(annotator_user)
    assignment = assignment_next(campaign=campaign, annotator=annotator_user)
    judge = client.get(reverse("annotation:judge", args=[assignment.token])).content.decode()
    assert "<strong>carefully</strong>" in judge and "alert(" not in judge


def test_it_escapes_conversation_and_feedback_text(client, make_campaign, make_items, annotator_user):
    campaign = make_campaign()
    make_items(campaign, 1, human_feedback="<b>bold</b>", simulated_feedback="<img src=x onerror=boom()>",
               conversation=[{"role": "user", "content": "<script>steal()</script>"}])
    client.force_login(annotator_user)
    assignment = assignment_next(campaign=campaign, annotator=annotator_user)
    page = client.get(reverse("annotation:judge", args=[assignment.token])).content.decode()
    assert "&lt;script&gt;steal()" in page and "<script>steal" not in page
    assert "&lt;img src=x" in page and "<b>bold</b>" not in page


def test_it_links_only_a_safe_source_url(client, make_campaign, make_items, operator_user):
    """Rows stored before the import checked the field may hold a link that opens another site."""
    campaign = make_campaign()
    safe, unsafe = make_items(campaign, 2)
    Item.objects.filter(pk=safe.pk).update(source_url="/evaluation/episodes/4/", source_label="episode four")
    Item.objects.filter(pk=unsafe.pk).update(source_url="/\\evil.example/path", source_label="episode evil")
    client.force_login(operator_user)
    page = client.get(reverse("annotation:campaign_detail", args=[campaign.pk])).content.decode()
    assert '<a href="/evaluation/episodes/4/" rel="noopener noreferrer">episode four</a>' in page
    assert "evil.example" not in page and "episode evil" in page


def test_it_records_a_judgment_and_moves_to_the_next_item(client, campaign, annotator_user):
    client.force_login(annotator_user)
    first = client.post(reverse("annotation:judge_next", args=[campaign.pk]))
    token = first["Location"].rstrip("/").split("/")[-1]
    page = client.get(first["Location"])
    assert page.status_code == 200 and Assignment.objects.get(token=token).opened_at is not None
    answer = client.post(first["Location"], {**CHOICES, "comment": "clear", "time_spent_ms": "4200"})
    judgment = Judgment.objects.get()
    assert judgment.comment == "clear" and judgment.time_spent_ms == 4200
    assert answer.status_code == 302 and answer["Location"] != first["Location"]
    again = client.post(first["Location"], {**CHOICES, "criterion_naturalness": "B"})
    assert again.status_code == 302 and Judgment.objects.count() == 1
    assert Judgment.objects.get().choices["naturalness"] == "A"


def test_it_keeps_the_answers_and_names_the_missing_criterion(client, campaign, annotator_user):
    client.force_login(annotator_user)
    url = client.post(reverse("annotation:judge_next", args=[campaign.pk]))["Location"]
    answer = client.post(url, {"criterion_naturalness": "B", "comment": "half done"})
    page = answer.content.decode()
    assert answer.status_code == 400 and "Choose an answer to this question: A or B is better." in page
    assert 'value="B" checked' in page and "half done" in page
    assert not Judgment.objects.exists()


def test_it_hides_other_annotators_assignments(client, campaign, annotators):
    owner, other = annotators(2)
    assignment = assignment_next(campaign=campaign, annotator=owner)
    client.force_login(other)
    assert client.get(reverse("annotation:judge", args=[assignment.token])).status_code == 404
    assert client.post(reverse("annotation:judge", args=[assignment.token]), CHOICES).status_code == 404


def test_it_resumes_open_work_from_the_queue(client, campaign, annotator_user):
    client.force_login(annotator_user)
    assignment = assignment_next(campaign=campaign, annotator=annotator_user)
    page = client.get(reverse("annotation:queue")).content.decode()
    assert reverse("annotation:judge", args=[assignment.token]) in page and "Continue judging" in page


def test_it_lets_annotators_write_feedback_that_opens_judging(client, make_campaign, annotators):
    campaign = make_campaign()
    items_from_conversations(campaign=campaign, conversations=[item_fields(human_feedback="", source_ref="e:1")])
    writer, judge = annotators(2)
    client.force_login(writer)
    location = client.post(reverse("annotation:write_next", args=[campaign.pk]))["Location"]
    page = client.get(location).content.decode()
    assert "My washing machine leaks." in page
    assert item_fields()["simulated_feedback"] not in page  # writers never see the simulated feedback
    assert client.post(location, {"text": " "}).status_code == 400
    unrated = client.post(location, {"text": "You ignored the warranty."})
    assert unrated.status_code == 400 and unrated.context["error"].field == "score"  # writers also rate
    client.post(location, {"text": "You ignored the warranty.", "time_spent_ms": "9000", "score": "3",
                           "action": "dislike"})
    task = FeedbackTask.objects.get()
    assert task.status == FeedbackTask.Status.DONE and task.time_spent_ms == 9000
    assert (task.score, task.action) == (3, "dislike")
    assert Item.objects.get().human_feedback == "You ignored the warranty."
    client.force_login(judge)
    assert "/judge/" in client.post(reverse("annotation:judge_next", args=[campaign.pk]))["Location"]


def test_it_exports_downloads_for_operators(client, campaign, operator_user):
    client.force_login(operator_user)
    answer = client.get(reverse("annotation:campaign_export", args=[campaign.pk, "results", "csv"]))
    assert answer["Content-Type"].startswith("text/csv") and "attachment" in answer["Content-Disposition"]
    assert answer.content.decode().startswith("scope,group,criterion,kappa")
    assert client.get(reverse("annotation:campaign_export", args=[campaign.pk, "everything", "csv"])).status_code == 404


def test_it_renders_results_with_chart_data(client, campaign, operator_user):
    client.force_login(operator_user)
    page = client.get(reverse("annotation:campaign_results", args=[campaign.pk])).content.decode()
    assert 'id="results-data"' in page and "annotation/results.js" in page and "chart.umd.min.js" in page


def test_it_saves_quality_settings_and_refuses_exclusion_above_warning(client, operator_user):
    client.force_login(operator_user)
    fields = {"name": "QC", "criteria_text": "Tone: politer", "annotators_per_item": 3,
              "assignment_timeout_minutes": 30, "assignment_strategy": "max_disagreement",
              "max_annotators_per_item": 5, "attention_rate": "0.1", "attention_warn_below": "0.5",
              "attention_exclude_below": "0.7", "attention_min_checks": 3}
    refused = client.post(reverse("annotation:campaign_create"), fields)
    assert refused.status_code == 400 and "attention_exclude_below" in refused.context["form"].errors
    client.post(reverse("annotation:campaign_create"), fields | {"attention_exclude_below": "0.4"})
    campaign = Campaign.objects.get(name="QC")
    assert (campaign.assignment_strategy, campaign.attention_rate) == ("max_disagreement", 0.1)


def test_it_moves_a_campaign_through_its_file_and_toggles_standing(client, campaign, operator_user, annotator_user):
    assignment_next(campaign=campaign, annotator=annotator_user)
    client.force_login(operator_user)
    exported = client.get(reverse("annotation:campaign_export", args=[campaign.pk, "campaign", "jsonl"])).content
    upload = SimpleUploadedFile("campaign.jsonl", exported, content_type="application/x-ndjson")
    clash = client.post(reverse("annotation:campaign_import"), {"file": upload, "name": "Copy"})
    assert clash.status_code == 400 and "already used by a stored row" in clash.content.decode()
    toggle = reverse("annotation:participant_standing", args=[campaign.pk, annotator_user.pk])
    assert client.post(toggle, {"decision": "exclude"})["Location"].endswith(f"/campaigns/{campaign.pk}/results/")
    assert Participant.objects.get(annotator=annotator_user).standing == Participant.Standing.EXCLUDED
    assert client.post(toggle, {"decision": "maybe"}).status_code == 400
    campaign.delete()
    upload = SimpleUploadedFile("campaign.jsonl", exported, content_type="application/x-ndjson")
    moved = client.post(reverse("annotation:campaign_import"), {"file": upload})
    assert moved.status_code == 302 and Campaign.objects.get().name == campaign.name
