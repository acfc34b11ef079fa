"""Export and import compared field by field, over every concrete field of every model involved,
read from the models' _meta: a field added later fails here until someone decides whether the
file carries it (and says why not, below, when it does not).

Banks (orbs JSONL) and runs (evaluation-run JSON) round-trip; campaigns have no import (only
their items come in, and judgments and results go out), so for them this checks that the item
upload carries every Item field a person writes."""
import json

import pytest

from annotation.models import Item
from annotation.services import items_import
from annotation.services.intake import FIELDS as ITEM_UPLOAD_FIELDS
from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import run_drive, run_export_json, run_import
from orbs.dmrm.models import DMRMSettings, Experience, ExperienceStep, ExperienceTrajectory, SourceMemory
from orbs.models import EpisodeRecord, MemoryBank, Orb
from orbs.services import bank_export, bank_import
from tests.annotation.conftest import item_fields, make_campaign  # noqa: F401  (fixture)
from tests.evaluation.runs.conftest import launch  # noqa: F401  (fixture)
from tests.orbs.conftest import bank, make_orb  # noqa: F401  (fixtures)
from tests.orbs.dmrm.test_transfer import learned  # noqa: F401  (fixture: DMRM memory in every state)
from tests.orbs.test_transfer import busy_bank  # noqa: F401  (fixture: Orbs in every review state)
from tests.reliability.test_backup_restore import comparable

pytestmark = pytest.mark.django_db

IDENTITY = "the copy's own row"


def field_differences(original, copy, *, not_carried: dict[str, str], same_by: dict | None = None) -> list[str]:
    """Every concrete field of the model that differs between `original` and `copy`, except those
    the file does not carry by design. `same_by[name](a, b)` compares a related row by content
    (its id differs between the two)."""
    same_by = same_by or {}
    names = {field.name for field in type(original)._meta.concrete_fields}
    assert not (set(not_carried) | set(same_by)) - names, "a listed field no longer exists"
    differences = []
    for field in type(original)._meta.concrete_fields:
        if field.name in not_carried:
            continue
        if field.name in same_by:
            a, b = getattr(original, field.name), getattr(copy, field.name)
            equal = same_by[field.name](a, b)
        else:
            a, b = comparable(getattr(original, field.attname)), comparable(getattr(copy, field.attname))
            equal = a == b
        if not equal:
            differences.append(f"{type(original).__name__}.{field.name}: {a!r} != {b!r}")
    return differences


def _same_orb(a: Orb | None, b: Orb | None) -> bool:
    return (a and a.content_hash) == (b and b.content_hash)


# --- banks -------------------------------------------------------------------------------------

BANK_NOT_CARRIED = {"id": IDENTITY, "name": "imported under a name of its own", "slug": "made from the new name"}
ORB_NOT_CARRIED = {"id": IDENTITY, "bank": "the bank imported into"}
EPISODE_NOT_CARRIED = {
    "id": IDENTITY, "bank": "the bank imported into",
    "status": "the source server's reflection work; a copy arrives reflected (done)",
    "attempts": "the source server's reflection work", "started_at": "the source server's reflection work",
    "finished_at": "the source server's reflection work", "error": "the source server's reflection work",
    "submitted_by": "accounts are not in the file",
}
EVENT_NOT_CARRIED = {"id": IDENTITY, "orb": "the copied Orb"}
# Rows that point at a bank but are not part of its file, and why.
NOT_IN_BANK_FILE = {
    "orbs.RetrievalLog": "this server's log of agents' queries, not the memory itself",
    "orbs.DMRMRetrievalLog": "this server's log of agents' queries, not the memory itself",
    "evaluation.EvaluationRun": "runs have an export of their own",
    "orbs.Dialogue": "a naive-RAG run's raw dialogues (its baseline corpus) are not in the bank file yet",
    "orbs.DialogueMessage": "a naive-RAG run's raw dialogues (its baseline corpus) are not in the bank file yet",
    "orbs.BankEvent": "this server's audit of the bank (archive, restore, erasures), not the memory itself",
    "orbs.HistoryEntry": "the file carries the source's chain, which the import verifies; the copy starts its own "
                         "chain with an entry naming the file's head (docs/SECURITY.md)",
}


def test_every_model_that_belongs_to_a_bank_is_in_its_file_or_named_here():
    in_file = {"orbs.Orb", "orbs.EpisodeRecord", "orbs.DMRMSettings", "orbs.SourceMemory", "orbs.Experience",
               "orbs.ExperienceTrajectory", "orbs.ExperienceStep"}
    pointing = {relation.related_model._meta.label for relation in MemoryBank._meta.related_objects}
    assert pointing == in_file | set(NOT_IN_BANK_FILE)


def _events(orb: Orb) -> list:
    return list(orb.events.order_by("at", "pk"))


def _both_or_neither(a, b) -> bool:
    return (a is None) == (b is None)


def _orb_differences(original: Orb, copy: Orb) -> list[str]:
    differences = field_differences(original, copy, not_carried=ORB_NOT_CARRIED, same_by={
        "supersedes": _same_orb, "lineage": _same_orb, "near_duplicate_of": _same_orb, "merged_into": _same_orb,
        "episode": _both_or_neither})
    if original.episode and copy.episode:
        differences += field_differences(original.episode, copy.episode, not_carried=EPISODE_NOT_CARRIED,
                                         same_by={"orb": _same_orb})
    events, copied_events = _events(original), _events(copy)
    assert len(events) == len(copied_events), original.content_hash
    for event, copied in zip(events, copied_events):
        differences += field_differences(event, copied, not_carried=EVENT_NOT_CARRIED)
    return differences


def test_a_bank_round_trips_field_by_field(busy_bank):
    # Field by field as a copy of this server's own bank keeps them; a file from elsewhere arrives
    # unapproved (tests/orbs/test_transfer_review.py).
    report = bank_import(lines=list(bank_export(bank=busy_bank)), name="Round trip", keep_review=True)
    assert report.ok, report.errors
    copy = MemoryBank.objects.get(name="Round trip")
    assert field_differences(busy_bank, copy, not_carried=BANK_NOT_CARRIED) == []
    originals = {orb.content_hash: orb for orb in Orb.objects.filter(bank=busy_bank)}
    copies = {orb.content_hash: orb for orb in Orb.objects.filter(bank=copy)}
    assert set(copies) == set(originals) and len(originals) == 7
    differences = [d for key, orb in originals.items() for d in _orb_differences(orb, copies[key])]
    assert not differences, "\n".join(differences)
    assert EpisodeRecord.objects.filter(bank=copy).count() == EpisodeRecord.objects.filter(bank=busy_bank).count()


DMRM_NOT_CARRIED = {"id": IDENTITY, "bank": "the bank imported into"}


def _same_source_memory(a: SourceMemory | None, b: SourceMemory | None) -> bool:
    return (a and a.name) == (b and b.name)


def _same_entry(a: Experience | None, b: Experience | None) -> bool:
    return (a and (a.memory, a.state_key, a.action_key)) == (b and (b.memory, b.state_key, b.action_key))


def _by(model, bank, identity) -> dict:
    rows = {identity(row): row for row in model.objects.filter(bank=bank)}
    assert len(rows) == model.objects.filter(bank=bank).count(), f"{model.__name__}: identity is not unique"
    return rows


DMRM_ROWS = {  # model -> how a row is recognised in the copy, and related rows compared by content
    DMRMSettings: (lambda row: "the settings", {}),
    SourceMemory: (lambda row: row.name, {}),
    Experience: (lambda row: (row.memory, row.state_key, row.action_key, row.source_memory and row.source_memory.name),
                 {"source_memory": _same_source_memory}),
    ExperienceTrajectory: (lambda row: row.trajectory_id, {}),
    ExperienceStep: (lambda row: (row.trajectory_id, row.step), {"experience": _same_entry}),
}


def test_a_banks_dmrm_memory_round_trips_field_by_field(learned):
    report = bank_import(lines=list(bank_export(bank=learned)), name="DMRM round trip", keep_review=True)
    assert report.ok, report.errors
    copy = MemoryBank.objects.get(name="DMRM round trip")
    differences = []
    for model, (identity, same_by) in DMRM_ROWS.items():
        originals, copies = _by(model, learned, identity), _by(model, copy, identity)
        assert set(copies) == set(originals) and originals, model.__name__
        for key, row in originals.items():
            differences += field_differences(row, copies[key], not_carried=DMRM_NOT_CARRIED, same_by=same_by)
    assert not differences, "\n".join(differences)


# --- runs ----------------------------------------------------------------------------------------

PROCESSING = "this server's work in progress"
PLAYED_HERE = "when this server played it"
RUN_NOT_CARRIED = {
    "id": IDENTITY, "task_set": "this server's task set; the cells name their tasks by task_key",
    "task_pks": "this server's task rows", "bank": "this server's bank; a bank travels in a file of its own",
    "executor": "how this server played it", "watch_until": PROCESSING, "created_by": "the account that imported it",
    "imported": "marks the copy", "imported_from": "marks the copy with where it came from",
    "pins": "carried as the exporting server pinned them, with `import` added: what the copy could not carry",
}
TRIAL_NOT_CARRIED = {
    "id": IDENTITY, "run": "the imported run", "orbs_written": "the Orbs stay in this server's bank",
    "experiences_written": "the experiences stay in this server's bank", "claim_token": PROCESSING,
    "claimed_by": PROCESSING, "claimed_at": PROCESSING, "started_at": PLAYED_HERE, "finished_at": PLAYED_HERE,
}
ROW_NOT_CARRIED = {
    "id": IDENTITY, "run": "the imported run", "trial": "the imported run's trial",
    "task": "this server's task row; task_key names the task", "episode": "transcripts are not in the results file",
    "orb": "the Orb stays in this server's bank", "attempts": PROCESSING, "claim_token": PROCESSING,
    "claimed_by": PROCESSING, "claimed_at": PROCESSING, "queued_at": PROCESSING, "finished_at": PLAYED_HERE,
    "imported_feedback": "the copy's simulated feedback, which the original keeps on its episode (compared below)",
}


@pytest.fixture
def played(launch):
    """A run whose settings all differ from the defaults, so a setting the file drops shows."""
    return run_drive(run=launch(
        task_ids=["shop-app-001", "shop-app-023"], domain="appliances", trials=2, pass_k=2, memory_mode="none",
        memory_k=3, approved_only=False, same_customer_only=True, per_turn=False, review_gate="wait", seed=7,
        max_turns=10, concurrency=2, feedback_enabled=True))


def test_a_run_round_trips_field_by_field(played, operator_user):
    assert played.status == EvaluationRun.Status.COMPLETED
    copy = run_import(data=json.loads(json.dumps(run_export_json(run=played))), user=operator_user)
    differences = field_differences(played, copy, not_carried=RUN_NOT_CARRIED)
    for trial in played.trial_rows.all():
        differences += field_differences(trial, copy.trial_rows.get(number=trial.number), not_carried=TRIAL_NOT_CARRIED)
    for row in played.run_episodes.select_related("trial", "episode__simulated_feedback"):
        copied = copy.run_episodes.get(trial__number=row.trial.number, task_key=row.task_key)
        differences += field_differences(row, copied, not_carried=ROW_NOT_CARRIED)
        feedback = row.episode.simulated_feedback
        if (copied.imported_feedback or {}).get("score") != feedback.score:
            differences.append(f"{row.task_key}: feedback score {feedback.score} came back as {copied.imported_feedback}")
    assert not differences, "\n".join(differences)


# --- campaigns: no import; items come in through the upload format -------------------------------

ITEM_SET_HERE = {
    "id": IDENTITY, "campaign": "the campaign uploaded into", "created_at": "when it was uploaded",
    "human_feedback_author": "the annotator who writes the human feedback in memweb",
}


def test_the_item_upload_carries_every_item_field_a_person_writes(make_campaign):
    assert {field.name for field in Item._meta.concrete_fields} == set(ITEM_UPLOAD_FIELDS) | set(ITEM_SET_HERE)
    record = item_fields(source_ref="study-row-1", is_gold=True, gold_expected={"naturalness": "human"})
    campaign = make_campaign()
    report = items_import(campaign=campaign, records=[(1, record)])
    assert report.ok, report.problems
    item = campaign.items.get()
    assert {name: getattr(item, name) for name in ITEM_UPLOAD_FIELDS} == {name: record[name] for name in ITEM_UPLOAD_FIELDS}
