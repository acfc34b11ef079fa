"""An Orb's stable identity: edits make revisions under the same id, any revision's id answers the
current revision, invisible text differences make no revision, and the API's user is the actor."""
import json

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.urls import reverse

from orbs.models import MemoryBank, Orb, ReviewEvent
from orbs.services import (
    bank_export,
    bank_get_or_create,
    bank_import,
    episode_reflect,
    orb_edit,
    orb_from_episode,
)
from tests.orbs.conftest import post, success_trajectory

API = "/api/orbs"
BETTER = "Check the door latch before offering a replacement."


@pytest.fixture
def reviewer(reviewer_user):
    client = Client()
    client.force_login(reviewer_user)
    return client


@pytest.fixture
def edited(make_orb, reviewer_user):
    """An approved Orb edited once: (its first revision, its second)."""
    first = make_orb("My microwave door will not close.")
    second = orb_edit(orb_id=first.pk, expected_version=first.version, actor=reviewer_user, outcome=BETTER)
    return Orb.objects.get(pk=first.pk), second


def test_an_api_edit_keeps_the_id_and_any_revision_id_reads_the_current_revision(reviewer, make_orb):
    orb = make_orb("My microwave door will not close.")
    edited = post(reviewer, f"{API}/orbs/{orb.pk}/edit", {"expected_version": orb.version, "outcome": BETTER})
    assert edited.status_code == 200
    body = edited.json()
    assert (body["id"], body["revision"], body["outcome"]) == (orb.pk, 2, BETTER)
    assert body["revision_id"] != orb.pk and body["supersedes_id"] == orb.pk
    for any_id in (orb.pk, body["revision_id"]):
        read = reviewer.get(f"{API}/orbs/{any_id}").json()
        assert (read["id"], read["revision"], read["outcome"], read["status"]) == (orb.pk, 2, BETTER, "approved")
    assert [(e["revision"], e["action"]) for e in read["history"]] == [
        (1, "created"), (1, "approved"), (1, "superseded"), (2, "edited")]


def test_a_version_seen_before_an_edit_is_stale_after_it(reviewer, edited):
    first, second = edited
    assert second.version == first.version == 3  # created 1, approved 2, edited 3
    stale = post(reviewer, f"{API}/orbs/{first.pk}/reject", {"expected_version": 2, "note": "too vague"})
    assert stale.status_code == 409 and stale.json()["orb_id"] == first.pk and stale.json()["current_version"] == 3
    rejected = post(reviewer, f"{API}/orbs/{first.pk}/reject", {"expected_version": 3, "note": "too vague"})
    assert rejected.status_code == 200 and (rejected.json()["revision_id"], rejected.json()["status"]) == (
        second.pk, "rejected")


def test_the_revisions_of_an_orb_are_listed_with_their_events(reviewer, edited):
    first, second = edited
    listed = reviewer.get(f"{API}/orbs/{second.pk}/revisions").json()
    assert (listed["id"], listed["current_revision"]) == (first.pk, 2)
    assert [(r["revision"], r["revision_id"], r["status"]) for r in listed["revisions"]] == [
        (1, first.pk, "superseded"), (2, second.pk, "approved")]
    assert [[e["action"] for e in r["events"]] for r in listed["revisions"]] == [
        ["created", "approved", "superseded"], ["edited"]]
    assert {r["id"] for r in listed["revisions"]} == {first.pk}
    assert reviewer.get(f"{API}/orbs/999999/revisions").status_code == 404


def test_retrieval_and_the_list_name_an_orb_by_its_stable_id(agent, bank, edited):
    first, second = edited
    hits = post(agent, f"{API}/banks/{bank.slug}/retrieve", {"query": "microwave door"}).json()["hits"]
    assert [(h["orb"]["id"], h["orb"]["revision"], h["orb"]["revision_id"]) for h in hits] == [
        (first.pk, 2, second.pk)]
    listed = agent.get(f"{API}/orbs", {"bank": bank.slug}).json()["items"]
    assert [(o["id"], o["revision"]) for o in listed] == [(first.pk, 2)]
    every = agent.get(f"{API}/orbs", {"bank": bank.slug, "all_revisions": True}).json()["items"]
    assert sorted((o["id"], o["revision"]) for o in every) == [(first.pk, 1), (first.pk, 2)]


def test_an_episode_sent_again_after_an_edit_answers_the_current_revision(agent, bank, make_orb, reviewer_user):
    episode = success_trajectory("My microwave door will not close.")
    first = orb_from_episode(bank=bank, trajectory=episode).orb
    orb_edit(orb_id=first.pk, expected_version=first.version, actor=reviewer_user, outcome=BETTER)
    again = post(agent, f"{API}/banks/{bank.slug}/episodes?sync=true", {"trajectory": episode})
    assert again.status_code == 200 and again.json()["created"] is False
    assert (again.json()["orb"]["id"], again.json()["orb"]["revision"], again.json()["orb"]["outcome"]) == (
        first.pk, 2, BETTER)


def test_a_merge_names_both_orbs_by_their_stable_ids(reviewer, bank, reviewer_user):
    keep = orb_from_episode(bank=bank, trajectory=success_trajectory("Can I swap my jeans for a size 34?")).orb
    dup = orb_from_episode(bank=bank, trajectory=success_trajectory("Can I swap my jeans for size 34?")).orb
    kept = orb_edit(orb_id=keep.pk, expected_version=keep.version, actor=reviewer_user, outcome="Offer the swap.")
    merged = post(reviewer, f"{API}/orbs/{dup.pk}/merge", {"expected_version": dup.version, "into_id": kept.pk})
    assert merged.status_code == 200 and (merged.json()["id"], merged.json()["revision"]) == (keep.pk, 2)
    read = reviewer.get(f"{API}/orbs/{dup.pk}").json()
    assert (read["id"], read["status"], read["merged_into_id"], read["near_duplicate_of_id"]) == (
        dup.pk, "superseded", keep.pk, keep.pk)
    assert kept.events.get(action="merged").after == {"absorbed": dup.pk}
    into_itself = post(reviewer, f"{API}/orbs/{keep.pk}/merge", {"expected_version": kept.version, "into_id": kept.pk})
    assert into_itself.status_code == 422


def test_a_browser_form_with_crlf_line_breaks_edits_only_the_context(reviewer, make_orb):
    orb = make_orb("The kettle leaks.\nIt is two weeks old.", approve=False)
    browser_text = {name: getattr(orb, name).replace("\n", "\r\n") + "  " for name in ("obs", "outcome")}
    form = {"expected_version": orb.version, "emotion": orb.emotion, "context": json.dumps({"sku": "KT-1"}),
            "note": "", "approve": "on", **browser_text}
    response = reviewer.post(reverse("orbs:edit", args=[orb.pk]), form)
    assert response.status_code == 302 and response.url == reverse("orbs:detail", args=[orb.pk])
    assert Orb.objects.filter(lineage_id=orb.pk).count() == 1
    after = Orb.objects.get(pk=orb.pk)
    assert (after.revision, after.content_hash, after.obs, after.context) == (1, orb.content_hash, orb.obs,
                                                                              {"sku": "KT-1"})


def test_an_edit_that_differs_only_invisibly_changes_nothing(reviewer, make_orb):
    orb = make_orb("Caf\u00e9 machine arrived broken.")
    decomposed = orb.obs.replace("\u00e9", "e\u0301") + "\r\n"
    refused = post(reviewer, f"{API}/orbs/{orb.pk}/edit", {"expected_version": orb.version, "obs": decomposed})
    assert refused.status_code == 422 and "changes nothing" in refused.json()["detail"][0]["msg"]
    assert Orb.objects.filter(lineage_id=orb.pk).count() == 1


def test_the_dashboard_edit_keeps_the_id_and_shows_earlier_revisions(reviewer, edited):
    first, second = edited
    page = reviewer.get(reverse("orbs:detail", args=[first.pk])).content.decode()
    assert f"Orb #{first.pk}" in page and "revision 2" in page and BETTER in page
    older = reviewer.get(reverse("orbs:detail", args=[first.pk]) + "?revision=1").content.decode()
    assert "An earlier revision" in older and first.outcome in older
    assert reviewer.get(reverse("orbs:detail", args=[first.pk]) + "?revision=9").status_code == 404


def test_an_api_ingest_and_an_api_remember_name_the_keys_user(agent, bank, operator_user):
    synced = post(agent, f"{API}/banks/{bank.slug}/episodes?sync=true",
                  {"trajectory": success_trajectory("My toaster burns the bread.")})
    queued = post(agent, f"{API}/banks/{bank.slug}/episodes",
                  {"trajectory": success_trajectory("My blender will not start.")})
    episode_reflect(ingest_id=queued.json()["ingest_id"])
    remembered = post(agent, f"{API}/banks/{bank.slug}/remember", {"text": "Offer the warranty first."})
    assert remembered.status_code == 201
    orb_ids = [synced.json()["orb"]["id"], agent.get(queued.json()["status_url"]).json()["orb"]["id"],
               remembered.json()["id"]]
    events = ReviewEvent.objects.filter(orb_id__in=orb_ids)
    assert events.count() == 3
    assert {(event.actor, event.actor_name) for event in events} == {(operator_user, operator_user.username)}


def test_an_imported_bank_rebuilds_each_orbs_revisions(bank, edited):
    first, second = edited
    assert bank_import(lines=list(bank_export(bank=bank)), name="Copy").ok
    copy_first, copy_second = Orb.objects.filter(bank__name="Copy").order_by("revision")
    assert (copy_first.lineage_id, copy_first.revision) == (copy_first.pk, 1)
    assert (copy_second.lineage_id, copy_second.revision, copy_second.supersedes_id) == (copy_first.pk, 2,
                                                                                          copy_first.pk)


def test_an_orb_being_its_own_lineage_does_not_stop_its_deletion_or_its_banks(make_orb):
    lone = make_orb("The toaster burns the bread.")
    Orb.objects.filter(pk=lone.pk).delete()  # its own lineage and nothing else
    other = bank_get_or_create(name="Other shop")
    kept = make_orb("The kettle whistles too early.", target=other)
    MemoryBank.objects.filter(pk=other.pk).delete()
    assert not Orb.objects.filter(pk__in=[lone.pk, kept.pk]).exists()


def test_the_migration_numbers_existing_revision_chains(edited):
    first, second = edited
    executor = MigrationExecutor(connection)
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # so ALTER TABLE waits on no deferred checks
    executor.migrate([("orbs", "0011_bank_customer_scope_and_remembered_source")])
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    rows = Orb.objects.filter(pk__in=[first.pk, second.pk]).order_by("pk").values_list("lineage_id", "revision")
    assert list(rows) == [(first.pk, 1), (first.pk, 2)]
