"""A bank file cannot carry approvals past the review gate: what it says is approved arrives pending,
reviewed by nobody here, and agents are served none of it until a reviewer here approves it. Its
approval policy is not taken either. A copy of this server's own bank keeps both."""
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from memweb.models import ApiKey
from orbs.dmrm.models import Experience
from orbs.models import MemoryBank, Orb, ReviewEvent
from orbs.services import bank_export, bank_import, orb_approve
from tests.orbs.conftest import post
from tests.orbs.dmrm.test_transfer import learned  # noqa: F401  (fixture: DMRM memory in every state)

API = "/api/orbs"
LESSON = "My dryer takes three hours to dry towels."


@pytest.fixture
def key_headers(operator_user):
    _, secret = ApiKey.issue(user=operator_user, name="agent")
    return {"Authorization": f"Bearer {secret}"}


def _forged(bank, reviewer) -> bytes:
    """The red team's file: a pending Orb edited to say a real reviewer approved it, the chain dropped,
    the policy set to serve everything and approve everything."""
    lines = [json.loads(line) for line in bank_export(bank=bank)]
    header = lines[0] | {"approved_only": False, "auto_approve": "always"}
    orbs = [line | {"status": "approved", "reviewer": reviewer.get_username(), "reviewed_at": line["created_at"]}
            for line in lines if line["type"] == "orb"]
    return "".join(json.dumps(line) + "\n" for line in [header, *orbs]).encode()


def test_a_forged_approved_file_arrives_pending_and_is_served_to_no_agent(
        client, key_headers, bank, make_orb, reviewer_user, django_capture_on_commit_callbacks):
    make_orb(LESSON, approve=False)
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(f"{API}/banks/import", {"file": SimpleUploadedFile("b.jsonl", _forged(bank, reviewer_user)),
                                                     "name": "Imported"}, headers=key_headers)
    assert answer.status_code == 202, answer.content
    imported = MemoryBank.objects.get(name="Imported")
    orb = imported.orbs.get()
    assert (orb.status, orb.reviewer, orb.reviewed_at) == (Orb.Status.PENDING, None, None)
    assert (imported.approved_only, imported.auto_approve) == (True, MemoryBank.AutoApprove.NEVER)
    flagged = orb.events.get(action=ReviewEvent.Action.FLAGGED)
    assert flagged.actor is None and f"approved elsewhere by {reviewer_user.get_username()}" in flagged.note
    assert not orb.events.filter(actor__isnull=False).exists()
    for asked in ({}, {"approved_only": False}):
        served = post(client, f"{API}/banks/{imported.slug}/retrieve", {"query": "dryer towels", **asked},
                      headers=key_headers)
        assert served.status_code == 200 and served.json()["hits"] == [], served.content
    # A reviewer here approves it in the queue: from then on it is served, under that reviewer.
    client.force_login(reviewer_user)
    approved = post(client, f"{API}/orbs/{orb.lineage_id}/approve", {"expected_version": orb.version})
    assert approved.status_code == 200 and approved.json()["status"] == "approved", approved.content
    client.logout()
    served = post(client, f"{API}/banks/{imported.slug}/retrieve", {"query": "dryer towels"}, headers=key_headers)
    assert [hit["orb"]["id"] for hit in served.json()["hits"]] == [orb.lineage_id]


def test_a_files_review_events_name_no_account_here(bank, make_orb, reviewer_user):
    orb = make_orb(LESSON, approve=False)
    orb_approve(orb_id=orb.pk, expected_version=orb.version, actor=reviewer_user)
    report = bank_import(lines=list(bank_export(bank=bank)), name="Imported")
    assert report.ok, report.errors
    events = ReviewEvent.objects.filter(orb__bank__name="Imported")
    assert not events.filter(actor__isnull=False).exists()
    assert f"{reviewer_user.get_username()} (imported)" in set(events.values_list("actor_name", flat=True))


def test_a_files_approved_experiences_arrive_pending_but_a_copy_keeps_its_review(learned):
    approved = Experience.objects.filter(bank=learned, status=Experience.Status.APPROVED).count()
    assert approved >= 2
    report = bank_import(lines=list(bank_export(bank=learned)), name="From a file")
    assert report.ok, report.errors
    imported = Experience.objects.filter(bank__name="From a file")
    assert not imported.filter(status=Experience.Status.APPROVED).exists()
    assert not imported.filter(reviewer__isnull=False).exists()
    assert imported.filter(status=Experience.Status.PENDING, review_note__contains="approved elsewhere").count() \
        == approved
    copied = bank_import(lines=list(bank_export(bank=learned)), name="A copy", keep_review=True)  # the copy job's
    assert copied.ok, copied.errors
    kept = Experience.objects.filter(bank__name="A copy", status=Experience.Status.APPROVED)
    assert kept.count() == approved and kept.filter(reviewer__isnull=False).exists()
