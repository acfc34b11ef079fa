"""The Orbs JSON API: agents write episodes and retrieve; reviewers review; bad input changes nothing."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from orbs.models import EpisodeRecord, MemoryBank, Orb
from tests.orbs.conftest import post, success_trajectory, trajectory

API = "/api/orbs"


@pytest.fixture
def reviewer(client, reviewer_user):
    client.force_login(reviewer_user)
    return client


def test_it_queues_an_episode_and_reports_its_status(agent, bank, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = post(agent, f"{API}/banks/{bank.slug}/episodes",
                        {"trajectory": trajectory(), "source_label": "run-1"})
    assert response.status_code == 202
    body = response.json()
    assert body["status_url"] == f"http://testserver{API}/episodes/{body['ingest_id']}"
    status = agent.get(body["status_url"]).json()  # Celery runs eagerly in unit tests
    assert status["status"] == "done" and status["created"] is True
    assert status["orb"]["source"] == "api" and status["orb"]["source_label"] == "run-1"
    assert status["orb"]["reflector_backend"] == "scripted"


def test_it_reflects_synchronously_on_request_and_only_once(agent, bank):
    url = f"{API}/banks/{bank.slug}/episodes?sync=true"
    first = post(agent, url, {"trajectory": trajectory()})
    again = post(agent, url, {"trajectory": trajectory()})
    assert first.status_code == 201 and again.status_code == 200
    assert first.json()["orb"]["id"] == again.json()["orb"]["id"]
    assert again.json()["created"] is False
    assert first.json()["orb"]["content_hash"] == Orb.objects.get().content_hash


def test_it_names_each_bad_field_and_stores_nothing(agent, bank):
    bad = trajectory(reward="high", messages=[{"role": "robot", "content": "hi"}])
    del bad["success"]
    response = post(agent, f"{API}/banks/{bank.slug}/episodes", {"trajectory": bad})
    assert response.status_code == 422
    locations = {tuple(error["loc"][-3:]) for error in response.json()["detail"]}
    assert ("payload", "trajectory", "reward") in locations
    assert ("payload", "trajectory", "success") in locations
    assert any(error["loc"][-3:] == ["messages", 0, "role"] for error in response.json()["detail"])
    assert not EpisodeRecord.objects.exists()


def test_it_answers_404_for_an_unknown_bank(agent, reviewer):
    response = post(agent, f"{API}/banks/nope/episodes", {"trajectory": trajectory()})
    assert response.status_code == 404 and response.json() == {"detail": "No memory bank 'nope'"}
    assert post(agent, f"{API}/banks/nope/retrieve", {"query": "x"}).status_code == 404
    assert not EpisodeRecord.objects.exists()


def test_it_checks_credentials_and_roles(client, bank, annotator_user, reviewer_user):
    assert post(client, f"{API}/banks/{bank.slug}/retrieve", {"query": "x"}).status_code == 401
    client.force_login(annotator_user)
    assert client.get(f"{API}/orbs").status_code == 403
    client.force_login(reviewer_user)
    assert client.get(f"{API}/orbs").status_code == 200
    assert post(client, f"{API}/banks/{bank.slug}/episodes", {"trajectory": trajectory()}).status_code == 403


def test_it_retrieves_hits_with_scores_and_a_prompt_block(agent, bank, make_orb):
    orb = make_orb("My fridge is making a loud buzzing noise.")
    make_orb("I want to return a dress that does not fit.")
    response = post(agent, f"{API}/banks/{bank.slug}/retrieve",
                    {"query": "buzzing fridge", "context": {"domain": "appliances"}, "k": 1, "client": "agent-1"})
    body = response.json()
    assert response.status_code == 200
    assert [(hit["rank"], hit["orb"]["id"]) for hit in body["hits"]] == [(1, orb.pk)]
    assert 0 < body["hits"][0]["score"] <= 1
    assert "Lesson:" in body["prompt_block"] and body["rewriter_backend"] == "scripted"
    outcome = post(agent, f"/api/orbs/retrievals/{body['retrieval_id']}/outcome", {"success": True, "reward": 1.0})
    assert outcome.status_code == 200


def test_it_rejects_bad_retrieval_input_by_field(agent, bank):
    response = post(agent, f"{API}/banks/{bank.slug}/retrieve", {"query": "", "k": 0, "min_score": 3})
    assert response.status_code == 422
    assert {error["loc"][-1] for error in response.json()["detail"]} == {"query", "k", "min_score"}


@pytest.mark.parametrize("query", ["", "   ", "\n\t "])
def test_a_blank_query_is_refused_as_an_empty_one_is(agent, bank, query):
    response = post(agent, f"{API}/banks/{bank.slug}/retrieve", {"query": query})
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "payload", "query"] and error["msg"]


def test_it_lists_orbs_with_filters_and_pages(reviewer, make_orb):
    make_orb("The blender is too loud.", domain="appliances")
    pending = make_orb("The sweater shrank in the wash.", domain="clothing", approve=False)
    body = reviewer.get(f"{API}/orbs", {"domain": "clothing"}).json()
    assert body["count"] == 1 and body["items"][0]["id"] == pending.pk
    everything = reviewer.get(f"{API}/orbs").json()
    assert [item["status"] for item in everything["items"]] == ["pending", "approved"]  # pending first
    assert reviewer.get(f"{API}/orbs", {"q": "shrank"}).json()["count"] == 1
    assert reviewer.get(f"{API}/orbs", {"status": "nonsense"}).status_code == 422
    detail = reviewer.get(f"{API}/orbs/{pending.pk}").json()
    assert detail["history"][0]["action"] == "created" and "shrank" in detail["document"]


def test_a_page_number_past_any_list_is_refused_naming_it_not_a_500(reviewer):
    # Found by the schemathesis property test: the offset of such a page overflowed a bigint.
    response = reviewer.get(f"{API}/orbs", {"page": 184467440737095518})
    assert response.status_code == 422
    assert [error["loc"][-1] for error in response.json()["detail"]] == ["page"]
    assert reviewer.get(f"{API}/orbs", {"page": 1000}).json() == {"items": [], "count": 0}


def test_it_reviews_through_the_api_with_conflicts_as_409(client, make_orb, user_for_role):
    orb = make_orb("My microwave door will not close.", approve=False)
    alice, bob = user_for_role("reviewer"), user_for_role("reviewer")
    client.force_login(alice)
    assert post(client, f"{API}/orbs/{orb.pk}/approve", {"expected_version": 1}).json()["status"] == "approved"
    client.force_login(bob)
    stale = post(client, f"{API}/orbs/{orb.pk}/reject", {"expected_version": 1, "note": "weak"})
    assert stale.status_code == 409
    assert stale.json()["current_version"] == 2 and stale.json()["current_status"] == "approved"
    no_reason = post(client, f"{API}/orbs/{orb.pk}/reject", {"expected_version": 2, "note": " "})
    assert no_reason.status_code == 422 and no_reason.json()["detail"][0]["loc"][-1] == "note"
    assert "a note (the reason) is required to reject" in no_reason.json()["detail"][0]["msg"]
    edited = post(client, f"{API}/orbs/{orb.pk}/edit",
                  {"expected_version": 2, "outcome": "Check the door latch first."})
    assert edited.status_code == 200 and edited.json()["supersedes_id"] == orb.pk
    assert post(client, f"{API}/orbs/999999/approve", {"expected_version": 1}).status_code == 404


def test_it_applies_bulk_actions(reviewer, make_orb):
    a = make_orb("The blender is too loud.", approve=False)
    b = make_orb("The kettle whistles too early.", approve=False)
    response = post(reviewer, f"{API}/orbs/bulk", {"action": "approve", "items": [
        {"id": a.pk, "expected_version": 1}, {"id": b.pk, "expected_version": 1}]})
    assert response.status_code == 200 and [o["status"] for o in response.json()["orbs"]] == ["approved", "approved"]
    missing_reason = post(reviewer, f"{API}/orbs/bulk",
                          {"action": "reject", "items": [{"id": a.pk, "expected_version": 2}]})
    assert missing_reason.status_code == 422


def test_it_reports_bank_statistics(reviewer, bank, make_orb):
    make_orb("The blender is too loud.")
    make_orb("My sweater shrank.", approve=False)
    stats = reviewer.get(f"{API}/banks/{bank.slug}/stats").json()
    assert stats["total"] == 2 and stats["by_status"]["pending"] == 1 and stats["by_status"]["approved"] == 1
    assert stats["scripted"] == 2


def test_it_exports_and_imports_a_bank_through_the_api(client, operator_user, bank, make_orb,
                                                       django_capture_on_commit_callbacks):
    make_orb("The blender is too loud.")
    client.force_login(operator_user)
    exported = b"".join(client.get(f"{API}/banks/{bank.slug}/export").streaming_content)
    upload = SimpleUploadedFile("bank.jsonl", exported, content_type="application/x-ndjson")
    with django_capture_on_commit_callbacks(execute=True):  # the job runs eagerly in unit tests
        response = client.post(f"{API}/banks/import", {"file": upload, "name": "Copy"})
    assert response.status_code == 202 and response["Location"] == response.json()["status_url"]
    job = client.get(response["Location"]).json()
    assert (job["status"], job["result"]["orbs"], job["result"]["bank"]) == ("succeeded", 1, "copy")
    assert job["result_url"] == "http://testserver/orbs/banks/copy/"
    assert MemoryBank.objects.get(name="Copy").orbs.count() == 1
    again = client.post(f"{API}/banks/import", {"file": SimpleUploadedFile("b.jsonl", exported), "name": "Copy"})
    assert again.status_code == 422 and again.json()["errors"][0]["field"] == "name"


def test_it_documents_the_trajectory_with_an_example(client, operator_user):
    client.force_login(operator_user)
    schema = client.get("/api/openapi.json").json()["components"]["schemas"]["TrajectoryIn"]
    assert schema["examples"][0]["errors"][0]["kind"] == "wrong_tool"
    assert success_trajectory("x")["success"] is True


def test_approve_and_reject_take_one_shape_and_reject_needs_its_note(client, make_orb, user_for_role):
    first, second = (make_orb(text, approve=False) for text in ("My kettle leaks.", "My toaster sparks."))
    client.force_login(user_for_role("reviewer"))
    for orb, action in ((first, "approve"), (second, "reject")):
        decided = post(client, f"{API}/orbs/{orb.pk}/{action}", {"expected_version": 1, "note": f"{action}: checked"})
        assert decided.status_code == 200, decided.content
        history = client.get(f"{API}/orbs/{orb.pk}/revisions").json()["revisions"][-1]["events"]
        assert history[-1]["note"] == f"{action}: checked"
    assert post(client, f"{API}/orbs/{first.pk}/reject", {"expected_version": 2}).status_code == 422
    older_caller = post(client, f"{API}/orbs/{first.pk}/reject", {"expected_version": 2, "reason": "still read"})
    assert older_caller.status_code == 200 and older_caller.json()["status"] == "rejected"
    schema = client.get("/api/openapi.json").json()["components"]["schemas"]
    assert set(schema["ApproveIn"]["properties"]) == set(schema["RejectIn"]["properties"]) == {"expected_version", "note"}
    assert schema["RejectIn"]["required"] == ["expected_version", "note"]
