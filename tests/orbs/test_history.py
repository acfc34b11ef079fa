"""A bank's tamper-evident history (orbs.services.history): review events, Orb revisions and
source-memory builds form a hash chain; edits and deletions made around the app (raw SQL) are named
by `verify_history`, the bank page and its API; exports carry the chain and imports check it."""
import json
import threading

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.db import connection, connections, transaction
from django.urls import reverse

from memweb.jobs import job_execute
from memweb.models import Job
from orbs.dmrm.services import source_memory_build
from orbs.models import HistoryEntry, MemoryBank, Orb, ReviewEvent
from orbs.services import bank_export, bank_get_or_create, bank_import, orb_edit, orb_reject
from orbs.services.erasure import customer_erase
from orbs.services.history import GENESIS, history_mark, history_verify, link_hash
from tests.orbs.dmrm.conftest import shop_trajectory

API = "/api/orbs"


def _sql(statement: str, params: list) -> None:
    """A write that bypasses the app (and AppendOnly), as someone with database access makes it."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def _entries(bank) -> list[tuple[str, int | None]]:
    return list(HistoryEntry.objects.filter(bank=bank).order_by("sequence").values_list("kind", "object_id"))


def _sequence_of(bank, kind: str, object_id: int) -> int:
    return HistoryEntry.objects.get(bank=bank, kind=kind, object_id=object_id).sequence


@pytest.fixture
def history(bank, make_orb):
    """A bank with some history: two Orbs (one approved on creation's heels, one rejected), an edit."""
    kept = make_orb("The blender is too loud.")
    rejected = make_orb("My sweater shrank.", approve=False)
    orb_reject(orb_id=rejected.pk, expected_version=rejected.version, actor=None, reason="Not a lesson.")
    edited = orb_edit(orb_id=kept.pk, expected_version=Orb.objects.get(pk=kept.pk).version, actor=None,
                      outcome="Offer a quieter model.")
    return kept, rejected, edited


def test_it_chains_every_row_as_it_is_written(bank, history):
    kept, _, edited = history
    entries = list(HistoryEntry.objects.filter(bank=bank).order_by("sequence"))
    assert [e.sequence for e in entries] == list(range(1, len(entries) + 1))
    assert [e.previous_hash for e in entries] == [GENESIS] + [e.entry_hash for e in entries[:-1]]
    chained = {(kind, pk) for kind, pk in _entries(bank)}
    assert chained == ({("orb_revision", pk) for pk in Orb.objects.filter(bank=bank).values_list("pk", flat=True)}
                       | {("review_event", pk) for pk in ReviewEvent.objects.values_list("pk", flat=True)})
    # The edit: the new revision is chained before its events (superseded, edited).
    assert _entries(bank)[-3:] == [("orb_revision", edited.pk), ("review_event", kept.events.last().pk),
                                   ("review_event", edited.events.get().pk)]
    check = history_verify(bank_id=bank.pk)
    assert check.ok and check.entries == len(entries) and check.head == entries[-1].entry_hash


def test_it_names_a_past_review_event_edited_with_raw_sql(bank, history, capsys):
    _, rejected, _ = history
    event = rejected.events.get(action="rejected")
    _sql("UPDATE orbs_reviewevent SET note = %s WHERE id = %s", ["Looks fine to me.", event.pk])
    check = history_verify(bank_id=bank.pk)
    sequence = _sequence_of(bank, "review_event", event.pk)
    assert (check.problem.sequence, check.problem.kind, check.problem.object_id, check.problem.reason) == (
        sequence, "review_event", event.pk, "content_changed")
    assert check.entries == sequence - 1
    with pytest.raises(CommandError, match="does not verify: test-shop"):
        call_command("verify_history", "--bank", bank.slug)
    assert (f"test-shop: BROKEN after {sequence - 1} verified entries: entry {sequence} (review_event "
            f"#{event.pk}): the row differs from what was chained: it was edited") in capsys.readouterr().out


def test_it_names_an_orb_revision_edited_with_raw_sql_and_a_deleted_row(bank, history):
    kept, rejected, _ = history
    _sql("UPDATE orbs_orb SET outcome = %s WHERE id = %s", ["Refund everything.", kept.pk])
    problem = history_verify(bank_id=bank.pk).problem
    assert (problem.kind, problem.object_id, problem.reason) == ("orb_revision", kept.pk, "content_changed")
    assert problem.sequence == _sequence_of(bank, "orb_revision", kept.pk)

    _sql("UPDATE orbs_orb SET outcome = %s WHERE id = %s", [kept.outcome, kept.pk])  # repaired
    event = rejected.events.get(action="rejected")
    _sql("DELETE FROM orbs_reviewevent WHERE id = %s", [event.pk])
    problem = history_verify(bank_id=bank.pk).problem
    assert (problem.sequence, problem.kind, problem.object_id, problem.reason) == (
        _sequence_of(bank, "review_event", event.pk), "review_event", event.pk, "row_missing")
    assert "its row is gone: deleted" in problem.message


def test_it_names_tampering_with_the_chain_itself(bank, history):
    second, third = HistoryEntry.objects.filter(bank=bank).order_by("sequence")[1:3]
    _sql("DELETE FROM orbs_historyentry WHERE id = %s", [third.pk])
    assert (history_verify(bank_id=bank.pk).problem.sequence, history_verify(bank_id=bank.pk).problem.reason) == (
        3, "entry_missing")
    HistoryEntry.objects.bulk_create([third])  # put back as it was

    # An entry rewritten to match an edited row no longer matches its own hash; with that recomputed
    # too, the next entry's link breaks.
    forged = link_hash(previous_hash=second.previous_hash, sequence=2, kind=second.kind, content="0" * 64)
    _sql("UPDATE orbs_historyentry SET content_hash = %s WHERE id = %s", ["0" * 64, second.pk])
    assert history_verify(bank_id=bank.pk).problem.reason == "entry_changed"
    _sql("UPDATE orbs_historyentry SET entry_hash = %s WHERE id = %s", [forged, second.pk])
    assert (history_verify(bank_id=bank.pk).problem.sequence, history_verify(bank_id=bank.pk).problem.reason) == (
        2, "content_changed")
    _sql("UPDATE orbs_historyentry SET content_hash = %s, entry_hash = %s WHERE id = %s",
         [second.content_hash, second.entry_hash, second.pk])

    inserted = ReviewEvent.objects.create(orb=history[0], action="approved", note="slipped in")  # around the chain
    problem = history_verify(bank_id=bank.pk).problem
    assert (problem.kind, problem.object_id, problem.reason) == ("review_event", inserted.pk, "unchained_row")


def test_an_erasure_keeps_the_chain_whole(bank, make_orb):
    make_orb("Where is my parcel?", customer_key="alice")
    make_orb("The lamp flickers.", customer_key="bob")
    customer_erase(bank=bank, customer_key="alice", actor=None, reason="asked to be forgotten")
    assert _entries(bank)[-1] == ("erasure", None)
    assert history_verify(bank_id=bank.pk).ok


def test_concurrent_appends_queue_instead_of_forking(transactional_db):
    bank = bank_get_or_create(name="Busy")
    rounds, errors = 8, []
    barrier = threading.Barrier(2)

    def writer(name: str) -> None:
        try:
            for n in range(rounds):
                with transaction.atomic():
                    barrier.wait(timeout=10)  # both transactions are open before either appends
                    history_mark(bank_id=bank.pk, kind="imported", detail={"writer": name, "n": n})
        except Exception as exc:  # noqa: BLE001 (any failure of a writer fails the test below)
            errors.append(exc)
            barrier.abort()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert list(HistoryEntry.objects.filter(bank=bank).order_by("sequence").values_list("sequence", flat=True)) == \
        list(range(1, 2 * rounds + 1))
    check = history_verify(bank_id=bank.pk)
    assert check.ok and check.entries == 2 * rounds


def test_an_export_carries_the_chain_and_its_import_continues_it(bank, history):
    from tests.orbs.dmrm.conftest import build_approved

    build_approved(bank)
    source_head = history_verify(bank_id=bank.pk).head
    lines = list(bank_export(bank=bank))
    chain = [json.loads(line) for line in lines if json.loads(line)["type"] == "history"]
    assert [line["entry_hash"] for line in chain][-1] == source_head
    assert {line["kind"] for line in chain} == {"orb_revision", "review_event", "source_memory"}

    report = bank_import(lines=lines, name="Imported")
    assert report.ok, report.errors
    imported = MemoryBank.objects.get(name="Imported")
    first = HistoryEntry.objects.get(bank=imported, sequence=1)
    assert (first.kind, first.detail) == ("imported", {"file_bank": "Test shop", "file_head": source_head,
                                                       "file_entries": len(chain)})
    check = history_verify(bank_id=imported.pk)
    # Each Orb the file says is approved arrives pending, with a "flagged" event saying so (chained too).
    flagged = ReviewEvent.objects.filter(orb__bank=imported, action=ReviewEvent.Action.FLAGGED).count()
    assert check.ok and check.entries == len(chain) + 1 + flagged


def _tampered(bank, edit) -> list[str]:
    lines = [json.loads(line) for line in bank_export(bank=bank)]
    edit(lines)
    return [json.dumps(line) + "\n" for line in lines]


def test_an_import_refuses_a_file_whose_chain_does_not_verify(bank, history, operator_user, client):
    kept, rejected, _ = history

    def forge_note(lines):
        orb = next(line for line in lines if line.get("content_hash") == rejected.content_hash)
        orb["events"][-1]["note"] = "Looks fine to me."

    forged = _tampered(bank, forge_note)
    sequence = _sequence_of(bank, "review_event", rejected.events.get(action="rejected").pk)
    report = bank_import(lines=forged, name="Forged")
    chain_line = next(n for n, line in enumerate(forged, 1) if json.loads(line).get("sequence") == sequence)
    assert [(e["line"], e["field"]) for e in report.errors] == [(chain_line, "history")]
    assert f"entry {sequence} (review_event #" in report.errors[0]["message"]
    assert "edited or removed" in report.errors[0]["message"]
    assert not MemoryBank.objects.filter(name="Forged").exists()

    # The same file through the API: 422 naming the entry, before any job is queued.
    client.force_login(operator_user)
    upload = SimpleUploadedFile("forged.jsonl", "".join(forged).encode())
    response = client.post(f"{API}/banks/import", {"file": upload, "name": "Forged"})
    assert response.status_code == 422
    assert response.json()["errors"][0]["line"] == chain_line

    # A chain line dropped from the file, or a row added to it, is refused too.
    dropped = _tampered(bank, lambda lines: lines.remove(next(x for x in lines if x.get("sequence") == 2)))
    assert "entry 2: missing from the chain" in bank_import(lines=dropped, name="Forged").errors[0]["message"]
    added = _tampered(bank, lambda lines: next(x for x in lines if x.get("content_hash") == kept.content_hash)
                      ["events"].append({**lines[1]["events"][0], "note": "added"}))
    assert "in no entry of the chain" in bank_import(lines=added, name="Forged").errors[0]["message"]


def test_existing_rows_are_chained_by_the_migration_in_the_order_they_happened(bank, history):
    migration = __import__("orbs.migrations.0016_history_chain", fromlist=["chain_existing_history"])
    before = _entries(bank)
    HistoryEntry.objects.filter(bank=bank).delete()  # as before the chain existed
    migration.chain_existing_history(apps, None)
    assert _entries(bank) == before
    assert history_verify(bank_id=bank.pk).ok


def test_a_source_memory_build_is_chained(bank):
    memory = source_memory_build(bank=bank, name="clothing", source_domain="clothing", gamma=0.9, min_reward=1.0,
                                 min_q=0.0, trajectories=[shop_trajectory("x1")])
    assert _entries(bank) == [("source_memory", memory.pk)]
    _sql("UPDATE orbs_sourcememory SET min_reward = 0 WHERE id = %s", [memory.pk])
    assert history_verify(bank_id=bank.pk).problem.reason == "content_changed"


def test_the_bank_page_and_api_show_the_check(bank, history, client, reviewer_user, django_capture_on_commit_callbacks):
    _, rejected, _ = history
    client.force_login(reviewer_user)
    entries = HistoryEntry.objects.filter(bank=bank).count()
    page = client.get(reverse("orbs:bank_detail", args=[bank.slug])).content.decode()
    assert f"Verified {entries} entries" in page

    event = rejected.events.get(action="rejected")
    _sql("UPDATE orbs_reviewevent SET note = %s WHERE id = %s", ["Looks fine to me.", event.pk])
    sequence = _sequence_of(bank, "review_event", event.pk)
    page = client.get(reverse("orbs:bank_detail", args=[bank.slug])).content.decode()
    assert f"Broken at entry {sequence} (content_changed)" in page and f"review_event #{event.pk}" in page

    with django_capture_on_commit_callbacks():
        started = client.post(reverse("orbs:bank_history_verify", args=[bank.slug]))
    assert started["Location"] == reverse("job_detail", args=[Job.objects.get(kind="orbs.history_verify").pk])

    answer = client.get(f"{API}/banks/{bank.slug}/history").json()
    assert answer["check"]["ok"] is False and answer["check"]["problem"]["sequence"] == sequence
    with django_capture_on_commit_callbacks():
        started = client.post(f"{API}/banks/{bank.slug}/history/verify")
    assert started.status_code == 202 and started["Location"] == started.json()["status_url"]
    job_execute(job_id=started.json()["id"])
    result = client.get(started.json()["status_url"]).json()
    assert result["status"] == "succeeded" and result["result"]["problem"]["object_id"] == event.pk
