"""The annotation JSON API: import, progress and results for operators (by API key
or session), next/judge for annotators, and the role checks."""
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotation.models import Campaign, Item, Judgment
from memweb.models import ApiKey
from memweb.roles import Role
from tests.annotation.conftest import item_fields

CHOICES = {"naturalness": "A", "relevance": "B", "overall_quality": "B"}


def _key(user) -> dict:
    _, secret = ApiKey.issue(user=user, name="tests")
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


def test_it_creates_a_campaign_and_imports_items_all_or_nothing(client, operator_user):
    auth = _key(operator_user)
    created = client.post("/api/annotation/campaigns", {"name": "API study"}, content_type="application/json", **auth)
    assert created.status_code == 201 and len(created.json()["criteria"]) == 3
    campaign_id = created.json()["id"]
    url = f"/api/annotation/campaigns/{campaign_id}/items"
    rejected = client.post(url, {"items": [item_fields(), item_fields(domain="")]}, content_type="application/json",
                           **auth)
    assert rejected.status_code == 422 and "nothing was stored" in rejected.json()["detail"][0]["msg"]
    assert rejected.json()["report"]["problems"] == [{"row": 2, "field": "domain", "reason": "required"}]
    assert not Item.objects.exists()
    accepted = client.post(url, {"items": [item_fields(), item_fields(human_feedback="")]},
                           content_type="application/json", **auth)
    assert accepted.status_code == 201 and accepted.json()["created"] == 2 and accepted.json()["needs_feedback"] == 1
    status_url = f"/api/annotation/campaigns/{campaign_id}/status"
    opened = client.post(status_url, {"status": "open"}, content_type="application/json", **auth)
    assert opened.status_code == 200 and opened.json()["status"] == "open"
    refused = client.post(status_url, {"status": "draft"}, content_type="application/json", **auth)
    assert refused.status_code == 409 and "cannot become draft" in refused.json()["detail"]


def test_it_rejects_bad_campaign_settings_naming_the_field(client, operator_user):
    auth = _key(operator_user)
    bad = client.post("/api/annotation/campaigns", {"name": "X", "criteria": [{"key": "Bad Key", "label": "x"}]},
                      content_type="application/json", **auth)
    assert bad.status_code == 422 and bad.json()["field"] == "criteria"
    client.post("/api/annotation/campaigns", {"name": "Twice"}, content_type="application/json", **auth)
    again = client.post("/api/annotation/campaigns", {"name": "Twice"}, content_type="application/json", **auth)
    assert again.status_code == 409


def test_it_imports_an_uploaded_file(client, make_campaign, operator_user):
    campaign = make_campaign()
    upload = SimpleUploadedFile("items.jsonl", "\n".join(json.dumps(item_fields()) for _ in range(2)).encode())
    answer = client.post(f"/api/annotation/campaigns/{campaign.pk}/upload", {"file": upload}, **_key(operator_user))
    assert answer.status_code == 201 and answer.json()["created"] == 2


def test_it_reports_progress_and_results(client, make_campaign, make_items, operator_user, annotator_user):
    campaign = make_campaign(annotators_per_item=1)
    make_items(campaign, 2)
    client.force_login(annotator_user)
    pair = client.post(f"/api/annotation/campaigns/{campaign.pk}/next").json()
    client.post(f"/api/annotation/assignments/{pair['token']}/judgment", {"choices": CHOICES},
                content_type="application/json")
    auth = _key(operator_user)
    progress = client.get(f"/api/annotation/campaigns/{campaign.pk}/progress", **auth).json()
    assert (progress["judgments_done"], progress["judgments_needed"], progress["percent"]) == (1, 2, 50)
    results = client.get(f"/api/annotation/campaigns/{campaign.pk}/results", **auth).json()
    assert results["overall"][0]["win"]["total"] == 1
    assert {entry["field"] for entry in results["breakdowns"]} == {"language", "task_format", "domain"}


def test_it_serves_annotators_their_next_pair_and_keeps_double_submits_single(client, make_campaign, make_items,
                                                                             annotator_user):
    campaign = make_campaign(annotators_per_item=1)
    make_items(campaign, 1)
    client.force_login(annotator_user)
    pair = client.post(f"/api/annotation/campaigns/{campaign.pk}/next")
    assert pair.status_code == 200 and pair.json()["options"] == ["A", "B"]
    url = f"/api/annotation/assignments/{pair.json()['token']}/judgment"
    bad = client.post(url, {"choices": {"naturalness": "A"}}, content_type="application/json")
    assert bad.status_code == 422 and bad.json()["field"] == "relevance"
    first = client.post(url, {"choices": CHOICES, "comment": "ok"}, content_type="application/json")
    second = client.post(url, {"choices": {**CHOICES, "naturalness": "B"}}, content_type="application/json")
    assert (first.status_code, second.status_code) == (201, 200)
    assert second.json()["choices"] == CHOICES and Judgment.objects.count() == 1
    assert client.post(f"/api/annotation/campaigns/{campaign.pk}/next").status_code == 204


@pytest.mark.parametrize("role, operator_status, annotator_status", [
    (Role.OPERATOR, 200, 403), (Role.ANNOTATOR, 403, 200), (Role.REVIEWER, 403, 403), (Role.ADMIN, 200, 200),
])
def test_it_enforces_roles_on_the_api(client, make_campaign, make_items, user_for_role, role, operator_status,
                                      annotator_status):
    campaign = make_campaign()
    make_items(campaign, 1)
    client.force_login(user_for_role(role))
    for path in ("results", "progress"):
        assert client.get(f"/api/annotation/campaigns/{campaign.pk}/{path}").status_code == operator_status
    assert client.get("/api/annotation/campaigns").status_code == operator_status
    assert client.post(f"/api/annotation/campaigns/{campaign.pk}/next").status_code == annotator_status


def test_it_answers_401_without_credentials_and_404_for_foreign_tokens(client, make_campaign, make_items,
                                                                       annotators):
    campaign = make_campaign()
    make_items(campaign, 1)
    assert client.get(f"/api/annotation/campaigns/{campaign.pk}/results").status_code == 401
    owner, other = annotators(2)
    client.force_login(owner)
    token = client.post(f"/api/annotation/campaigns/{campaign.pk}/next").json()["token"]
    client.force_login(other)
    assert client.get(f"/api/annotation/assignments/{token}").status_code == 404
    answer = client.post(f"/api/annotation/assignments/{token}/judgment", {"choices": CHOICES},
                         content_type="application/json")
    assert answer.status_code == 404


def test_it_does_not_hand_out_work_from_a_draft_campaign(client, make_campaign, make_items, annotator_user):
    campaign = make_campaign(status=Campaign.Status.DRAFT)
    make_items(campaign, 1)
    client.force_login(annotator_user)
    assert client.post(f"/api/annotation/campaigns/{campaign.pk}/next").status_code == 404


# --- the feedback-writing queue ---

def test_it_hands_out_and_takes_feedback_through_the_api(client, make_campaign, annotator_user):
    campaign = make_campaign()
    item = Item.objects.create(campaign=campaign, **item_fields(human_feedback="", simulated_score=9,
                                                                simulated_feedback="SECRET simulated text"))
    from annotation.models import FeedbackTask
    FeedbackTask.objects.create(item=item, campaign=campaign)
    auth = _key(annotator_user)
    task = client.post(f"/api/annotation/campaigns/{campaign.pk}/write-next", **auth)
    assert task.status_code == 200 and task.json()["done"] is False
    body = task.content.decode()
    assert "SECRET" not in body and "simulated" not in body.lower() and '"9"' not in body
    url = f"/api/annotation/feedback-tasks/{task.json()['token']}/feedback"
    missing = client.post(url, {"text": "Too slow.", "score": 11, "action": "like"}, content_type="application/json",
                          **auth)
    assert missing.status_code == 422 and missing.json()["field"] == "score"
    extra = client.post(url, {"text": "Too slow.", "score": 4, "action": "like", "mood": "x"},
                        content_type="application/json", **auth)
    assert extra.status_code == 422
    payload = {"text": "Too slow.", "score": 4, "action": "dislike"}
    first = client.post(url, payload, content_type="application/json", **auth)
    again = client.post(url, payload, content_type="application/json", **auth)
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json() | {"created": False} == again.json()
    item.refresh_from_db()
    assert item.human_feedback == "Too slow." and item.feedback_task.score == 4
    assert client.post(f"/api/annotation/campaigns/{campaign.pk}/write-next", **auth).status_code == 204


def test_it_hides_other_writers_tasks(client, make_campaign, annotators):
    campaign = make_campaign()
    item = Item.objects.create(campaign=campaign, **item_fields(human_feedback=""))
    from annotation.models import FeedbackTask
    FeedbackTask.objects.create(item=item, campaign=campaign)
    mine, theirs = annotators(2)
    token = client.post(f"/api/annotation/campaigns/{campaign.pk}/write-next", **_key(mine)).json()["token"]
    assert client.get(f"/api/annotation/feedback-tasks/{token}", **_key(theirs)).status_code == 404


def test_it_exports_imports_and_sets_standing_through_the_api(client, make_campaign, make_items, operator_user,
                                                               annotator_user):
    from annotation.services import assignment_next
    campaign = make_campaign()
    make_items(campaign, 2)
    assignment_next(campaign=campaign, annotator=annotator_user)
    auth = _key(operator_user)
    exported = client.get(f"/api/annotation/campaigns/{campaign.pk}/export", **auth)
    assert exported.status_code == 200 and exported["Content-Type"].startswith("application/x-ndjson")
    text = exported.content.decode()
    clash = client.post("/api/annotation/campaign-imports", {"text": text, "name": "Copy"},
                        content_type="application/json", **auth)
    assert clash.status_code == 422 and clash.json()["report"]["problems"][0]["field"] == "token"
    campaign.delete()
    imported = client.post("/api/annotation/campaign-imports", {"text": text}, content_type="application/json", **auth)
    assert imported.status_code == 201 and imported.json()["report"]["created"] == len(text.splitlines())
    url = f"/api/annotation/campaigns/{imported.json()['campaign_id']}/standing"
    excluded = client.post(url, {"annotator": annotator_user.username, "decision": "exclude"},
                           content_type="application/json", **auth)
    assert excluded.status_code == 200 and excluded.json()["standing"] == "excluded"
    unknown = client.post(url, {"annotator": "nobody", "decision": "exclude"}, content_type="application/json", **auth)
    assert unknown.status_code == 404
