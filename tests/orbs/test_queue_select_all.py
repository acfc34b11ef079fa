"""Bulk decisions: "select all on this page" ticks the page's rows, and "all matching the filters"
decides every Orb the queue's filters match, on every page, after a confirmation that states the
count and the banks, then by a job; exactly the confirmed Orbs, or nothing; never above the cap.
Hand-ticked Orbs are confirmed the same way (count, banks), then decided at once."""
import pytest
from django.urls import reverse

from memweb.models import Job, Workspace
from orbs.models import Orb
from orbs.services import bank_get_or_create, orb_approve, orb_remember
from orbs.services import bulk as bulk_service

BULK = reverse("orbs:bulk")


def _pending(bank, n: int, topic: str) -> list[Orb]:
    return [orb_remember(bank=bank, text=f"{topic} lesson number {i}: check the order first.").orb for i in range(n)]


def _all_matching(client, query: str, action: str = "approve", follow: bool = False, **extra):
    return client.post(f"{BULK}?{query}", {"action": action, "scope": "matching", **extra}, follow=follow)


@pytest.fixture
def returns(bank):
    return bank_get_or_create(name="Returns desk")


def _statuses(orbs) -> set[str]:
    return set(Orb.objects.filter(pk__in=[orb.pk for orb in orbs]).values_list("status", flat=True))


def test_it_confirms_the_count_and_the_bank_then_decides_every_matching_orb(client, reviewer_user, bank, returns,
                                                                             django_capture_on_commit_callbacks):
    shop = _pending(bank, 30, "Shop")  # more than a page of the queue
    orb_approve(orb_id=shop[0].pk, expected_version=shop[0].version, actor=None)  # matches, already approved
    desk = _pending(returns, 2, "Desk")
    client.force_login(reviewer_user)

    confirmation = _all_matching(client, f"bank={bank.slug}&status=")

    assert confirmation.status_code == 200 and _statuses(shop[1:]) == {"pending"}  # nothing before the confirmation
    html = confirmation.content.decode()
    assert "Approve 29 Orbs of 1 bank?" in html and "<strong>29</strong> of the 30 matching" in html
    assert "<strong>Test shop</strong>" in html and "Returns desk" not in html
    fingerprint = confirmation.context["plan"].fingerprint

    with django_capture_on_commit_callbacks(execute=True):
        started = _all_matching(client, f"bank={bank.slug}&status=", fingerprint=fingerprint)

    job = Job.objects.get()
    assert started["Location"] == reverse("job_detail", args=[job.pk])
    assert (job.status, job.title, job.result["count"]) == ("succeeded", "Approve 29 Orbs of Test shop", 29)
    assert job.result["url"] == reverse("orbs:queue") + f"?bank={bank.slug}&status="
    assert _statuses(shop) == {"approved"} and _statuses(desk) == {"pending"}
    assert "29 Orbs approved: back to the review queue" in client.get(started["Location"]).content.decode()


def test_the_confirmation_names_every_bank_when_the_filters_span_several(client, reviewer_user, bank, returns):
    _pending(bank, 2, "Shop")
    _pending(returns, 1, "Desk")
    client.force_login(reviewer_user)

    html = _all_matching(client, "status=pending", action="reject", reason="stale").content.decode()

    assert "Reject 3 Orbs of 2 banks?" in html and "<strong>Returns desk</strong>, <strong>Test shop</strong>" in html
    assert "Reason recorded on each: “stale”" in html


def test_orbs_that_change_after_the_confirmation_make_it_change_nothing(client, reviewer_user, bank):
    orbs = _pending(bank, 3, "Shop")
    client.force_login(reviewer_user)
    fingerprint = _all_matching(client, "status=pending").context["plan"].fingerprint
    orb_approve(orb_id=orbs[0].pk, expected_version=orbs[0].version, actor=None)  # meanwhile
    newcomer = _pending(bank, 1, "Late")[0]

    refused = _all_matching(client, "status=pending", fingerprint=fingerprint, follow=True)

    assert "Nothing was changed: the matching Orbs changed after you confirmed (now 3 to approve)" in (
        refused.content.decode())
    assert _statuses(orbs[1:] + [newcomer]) == {"pending"} and not Job.objects.exists()


def test_it_refuses_above_the_cap_and_says_so(client, reviewer_user, bank, monkeypatch):
    orbs = _pending(bank, 3, "Shop")
    monkeypatch.setattr(bulk_service, "BULK_CAP", 2)
    client.force_login(reviewer_user)

    refused = _all_matching(client, "status=pending", follow=True)

    assert "Nothing was changed: 3 matching Orbs could be approved, more than the 2 one decision may take" in (
        refused.content.decode())
    assert _statuses(orbs) == {"pending"}


def test_rejecting_all_matching_needs_a_reason_and_nothing_matching_is_said(client, reviewer_user, bank):
    orbs = _pending(bank, 2, "Shop")
    client.force_login(reviewer_user)

    no_reason = _all_matching(client, "status=pending", action="reject", follow=True)
    nothing = _all_matching(client, "status=rejected", action="reject", reason="x", follow=True)

    assert "Give a reason to reject the selected Orbs." in no_reason.content.decode()
    assert "none of the Orbs matching the filters can be rejected" in nothing.content.decode()
    assert _statuses(orbs) == {"pending"}


def test_all_matching_stays_in_the_workspace(client, reviewer_user, bank, django_capture_on_commit_callbacks):
    mine = _pending(bank, 1, "Shop")
    theirs = _pending(bank_get_or_create(name="Their bank", workspace=Workspace.objects.create(slug="t2", name="T2")),
                      1, "Theirs")
    client.force_login(reviewer_user)

    plan = _all_matching(client, "status=pending").context["plan"]
    with django_capture_on_commit_callbacks(execute=True):
        _all_matching(client, "status=pending", fingerprint=plan.fingerprint)

    assert plan.banks == ["Test shop"] and _statuses(mine) == {"approved"} and _statuses(theirs) == {"pending"}


def test_the_queue_offers_select_all_on_the_page_and_all_matching_with_the_count(client, reviewer_user, bank):
    _pending(bank, 3, "Shop")
    client.force_login(reviewer_user)

    html = client.get(reverse("orbs:queue"), {"status": "pending"}).content.decode()

    assert 'aria-label="Select all on this page"' in html
    assert "All 3 matching the filters, not only the ticked ones" in html


def test_a_decision_that_turned_stale_in_the_job_changes_nothing_and_says_so(
        client, reviewer_user, bank, django_capture_on_commit_callbacks):
    orbs = _pending(bank, 2, "Shop")
    client.force_login(reviewer_user)
    fingerprint = _all_matching(client, "status=pending").context["plan"].fingerprint
    with django_capture_on_commit_callbacks() as queued:  # confirmed; the worker has not run it yet
        _all_matching(client, "status=pending", fingerprint=fingerprint)
    orb_approve(orb_id=orbs[1].pk, expected_version=orbs[1].version, actor=None)  # meanwhile

    for callback in queued:
        callback()

    job = Job.objects.get()
    assert job.status == "failed" and job.error.startswith("Nothing was changed.")
    assert _statuses(orbs[:1]) == {"pending"}


def _ticked(client, orbs, action: str = "approve", headers=None, **extra):
    return client.post(BULK, {"action": action, "selected": [f"{orb.pk}:{orb.version}" for orb in orbs], **extra},
                       headers=headers or {})


def test_ticked_orbs_are_decided_once_confirmed_and_an_empty_selection_is_refused(client, reviewer_user, bank):
    orbs = _pending(bank, 2, "Shop")
    client.force_login(reviewer_user)

    empty = client.post(BULK, {"action": "approve"}, follow=True)
    asked = _ticked(client, orbs[:1])
    assert asked.status_code == 200 and _statuses(orbs) == {"pending"}  # nothing before the confirmation
    _ticked(client, orbs[:1], confirmed="yes")

    assert "Select at least one Orb, or tick “all matching the filters”." in empty.content.decode()
    assert (_statuses(orbs[:1]), _statuses(orbs[1:])) == ({"approved"}, {"pending"})


def test_the_ticked_confirmation_names_the_count_the_banks_and_the_reason(client, reviewer_user, bank, returns):
    shop = _pending(bank, 2, "Shop")
    desk = _pending(returns, 1, "Desk")
    client.force_login(reviewer_user)

    page = _ticked(client, shop + desk, action="reject", reason="too vague")

    html = page.content.decode()
    assert page.templates[0].name == "orbs/bulk_confirm.html"  # a whole page: it works without JavaScript
    assert "Reject 3 ticked Orbs of 2 banks?" in html
    assert "<strong>Returns desk</strong>, <strong>Test shop</strong>" in html and "“too vague”" in html
    for orb in shop + desk:
        assert f'name="selected" value="{orb.pk}:{orb.version}"' in html
    assert 'name="confirmed" value="yes"' in html and _statuses(shop + desk) == {"pending"}
    partial = _ticked(client, shop[:1], headers={"HX-Request": "true"})
    assert partial.templates[0].name == "orbs/_bulk_confirm_ticked.html"
    assert "Approve 1 ticked Orb of 1 bank?" in partial.content.decode()


def test_a_ticked_orb_that_changed_before_the_confirmation_changes_nothing(client, reviewer_user, bank):
    orbs = _pending(bank, 2, "Shop")
    client.force_login(reviewer_user)
    _ticked(client, orbs)
    orb_approve(orb_id=orbs[0].pk, expected_version=orbs[0].version, actor=None)  # meanwhile

    refused = _ticked(client, orbs, action="reject", reason="stale", confirmed="yes")

    assert refused.status_code == 302
    assert "Nothing was changed." in client.get(refused["Location"]).content.decode()
    assert _statuses(orbs[1:]) == {"pending"} and _statuses(orbs[:1]) == {"approved"}


def test_ticking_another_workspaces_orb_asks_nothing(client, reviewer_user, bank):
    theirs = _pending(bank_get_or_create(name="Their bank", workspace=Workspace.objects.create(slug="t3", name="T3")),
                      1, "Theirs")
    client.force_login(reviewer_user)

    assert _ticked(client, theirs).status_code == 404 and _statuses(theirs) == {"pending"}
