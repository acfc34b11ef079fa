"""A bank exported as JSONL imports back losslessly, or not at all."""
import json

import pytest

from orbs.models import EpisodeRecord, MemoryBank, Orb, ReviewEvent
from orbs.services import (
    bank_export,
    bank_get_or_create,
    bank_import,
    orb_edit,
    orb_from_episode,
    orb_merge,
    orb_reject,
    orb_remember,
    orbs_retrieve,
)
from tests.orbs.conftest import success_trajectory, trajectory


@pytest.fixture
def busy_bank(bank, make_orb, reviewer_user):
    """Orbs in every state: approved, rejected, a revision chain, a merged near-duplicate, pending."""
    make_orb("My dryer takes three hours to dry towels.")
    rejected = make_orb("The lamp I bought is the wrong colour.", approve=False)
    orb_reject(orb_id=rejected.pk, expected_version=1, actor=reviewer_user, reason="not actionable")
    edited = make_orb("The oven door glass cracked.", approve=False)
    orb_edit(orb_id=edited.pk, expected_version=1, actor=reviewer_user, outcome="Open a return with return_order.")
    keep = orb_from_episode(bank=bank, trajectory=success_trajectory("Can I swap my jeans for a size 34?")).orb
    dup = orb_from_episode(bank=bank, trajectory=success_trajectory("Can I swap my jeans for size 34?")).orb
    orb_merge(orb_id=dup.pk, expected_version=1, into_id=keep.pk, actor=reviewer_user)
    orb_from_episode(bank=bank, trajectory=trajectory())
    orbs_retrieve(bank=bank, query="dryer slow", context={})
    return bank


def _orb_lines(lines: list[str]) -> list[dict]:
    orbs = [line for line in map(json.loads, lines) if line["type"] == "orb"]  # the chain's lines follow them
    for orb in orbs:
        if orb["episode"]:
            orb["episode"].pop("key")  # database ids differ between banks; everything else must not
    return orbs


def test_it_round_trips_a_bank_losslessly(busy_bank):
    """As a copy of this server's own bank: a file from elsewhere loses its approvals (test_transfer_review)."""
    exported = list(bank_export(bank=busy_bank))
    report = bank_import(lines=exported, name="Copy of test shop", keep_review=True)
    assert report.ok, report.errors
    copy = MemoryBank.objects.get(name="Copy of test shop")
    assert (report.orbs, report.events) == (7, ReviewEvent.objects.filter(orb__bank=busy_bank).count())
    again = list(bank_export(bank=copy))
    assert _orb_lines(again) == _orb_lines(exported)
    header, copied_header = json.loads(exported[0]), json.loads(again[0])
    assert {**header, "name": "x"} == {**copied_header, "name": "x"}
    new = Orb.objects.get(bank=copy, supersedes__isnull=False)
    assert new.supersedes.bank == copy and new.episode.bank == copy
    assert Orb.objects.get(bank=copy, merged_into__isnull=False).merged_into.bank == copy
    assert copy.episodes.count() == busy_bank.episodes.count()


def test_it_reports_every_bad_line_and_imports_nothing(busy_bank):
    lines = list(bank_export(bank=busy_bank))
    altered = json.loads(lines[1])
    altered["outcome"] += " (edited by hand)"
    missing = json.loads(lines[2])
    del missing["status"]
    missing["vector"] = missing["vector"][:10]
    lines[1], lines[2] = json.dumps(altered), json.dumps(missing)
    lines.append("{not json")
    episodes_before = EpisodeRecord.objects.count()
    report = bank_import(lines=lines, name="Broken copy")
    assert not report.ok
    problems = {(error["line"], error["field"]) for error in report.errors}
    assert {(2, "content_hash"), (3, "status"), (3, "vector"), (len(lines), "(line)")} <= problems
    assert "SHA-256" in next(e["message"] for e in report.errors if e["line"] == 2)
    assert not MemoryBank.objects.filter(name="Broken copy").exists()
    assert EpisodeRecord.objects.count() == episodes_before


def test_it_refuses_to_import_over_a_bank_that_has_orbs(busy_bank):
    report = bank_import(lines=list(bank_export(bank=busy_bank)))
    assert [(e["line"], e["field"]) for e in report.errors] == [(1, "name")]


def test_a_per_customer_bank_with_a_remembered_lesson_round_trips(db):
    """Old files knew neither scope nor remembered Orbs: such a bank came back shared, its ids refused."""
    scoped = bank_get_or_create(name="per customer", customer_scope=MemoryBank.CustomerScope.PER_CUSTOMER)
    for customer in ("alice", "bob"):  # the same episode: two Orbs, one per customer
        orb_from_episode(bank=scoped, trajectory=success_trajectory("My kettle leaks.", customer_key=customer))
    orb_remember(bank=scoped, text="Offer a replacement before a refund.", customer_key="alice")
    exported = list(bank_export(bank=scoped))
    report = bank_import(lines=exported, name="per customer copy")
    assert report.ok, report.errors
    copy = MemoryBank.objects.get(name="per customer copy")
    assert copy.customer_scope == MemoryBank.CustomerScope.PER_CUSTOMER and copy.orbs.count() == 3
    assert copy.orbs.filter(source="remembered").count() == 1
    forged = json.loads(exported[1]) | {"customer_key": "mallory"}  # moved to another customer: the id no longer fits
    refused = bank_import(lines=[exported[0], json.dumps(forged)], name="forged")
    assert [(error["line"], error["field"]) for error in refused.errors] == [(2, "content_hash")]
