"""A bank's DMRM memory travels in its JSONL file: exported after the Orbs, imported all or nothing
with every problem named by line and field."""
import json

import pytest

from orbs.dmrm.models import DMRMSettings, Experience, ExperienceStep, ExperienceTrajectory, SourceMemory
from orbs.dmrm.services import (
    dmrm_memory_copy,
    dmrm_settings_update,
    experience_flag,
    experience_review,
    experiences_append_batch,
)
from orbs.dmrm.services.learning import Transition
from orbs.models import MemoryBank
from orbs.services import bank_copy, bank_copy_start, bank_export, bank_import
from tests.orbs.dmrm.conftest import build_approved

GOAL = "return the jacket from order W7"


@pytest.fixture
def learned(bank, reviewer_user, operator_user):
    """A bank with DMRM memory in every state: non-default settings, an approved source memory with
    one rejected entry, target entries learned from a successful trajectory, one reviewed and one flagged."""
    dmrm_settings_update(bank=bank, params={"alpha": 0.3, "c_max": 700, "suppression_mode": "down_weight",
                                            "state_match": "similar", "min_similarity": 0.1})
    build_approved(bank, actor=operator_user)
    steps = [Transition(trajectory_id="t1", step=n, goal=GOAL, observation=f"s{n}", action=f"a{n}",
                        reward=float(n == 1), next_observation=f"s{n + 1}", done=n == 1, success=True,
                        domain="clothing", task_ref="task-1") for n in range(2)]
    first, second = experiences_append_batch(bank=bank, transitions=steps)
    experience_review(experience_id=first.pk, expected_version=1, status="approved", actor=reviewer_user, note="ok")
    experience_flag(experience_id=second.pk, note="withholding measured harm")
    source = Experience.objects.filter(bank=bank, memory="source").first()
    experience_review(experience_id=source.pk, expected_version=1, status="rejected", actor=reviewer_user,
                      note="off topic")
    return bank


def lines_of(bank) -> list[dict]:
    return [json.loads(line) for line in bank_export(bank=bank)]


def texts(lines: list[dict]) -> list[str]:
    return [json.dumps(line) for line in lines]


def dmrm_counts(bank) -> tuple:
    return tuple(model.objects.filter(bank=bank).count()
                 for model in (DMRMSettings, SourceMemory, Experience, ExperienceTrajectory, ExperienceStep))


def test_the_bank_file_carries_the_dmrm_memory(learned):
    """Old code's file held the bank and its Orbs only: DMRM memory was lost on export."""
    kinds = [line["type"] for line in lines_of(learned)]
    assert kinds[0] == "bank" and kinds.count("dmrm_settings") == 1 and kinds.count("source_memory") == 1
    assert kinds.count("experience") == Experience.objects.filter(bank=learned).count() >= 3
    assert kinds.count("experience_trajectory") == 1 and kinds.count("experience_step") == 2
    report = bank_import(lines=texts(lines_of(learned)), name="Imported")
    assert report.ok, report.errors
    copy = MemoryBank.objects.get(name="Imported")
    assert dmrm_counts(copy) == dmrm_counts(learned)
    assert report.written["experiences"] == Experience.objects.filter(bank=learned).count()


def _bad(lines: list[dict], kind: str, **changes) -> list[dict]:
    """`lines` with the first line of `kind` changed."""
    position = next(i for i, line in enumerate(lines) if line["type"] == kind)
    return [line | changes if i == position else line for i, line in enumerate(lines)], position + 1


def test_a_bad_line_is_named_by_line_and_field_and_nothing_is_written(learned):
    lines = lines_of(learned)
    cases = [
        ("dmrm_settings", {"c_max": 3}, "c_max"),
        ("dmrm_settings", {"alpha": "high"}, "alpha"),
        ("experience", {"vector": [0.1] * 1024}, "vector"),
        ("experience", {"embedding_model": "another-model"}, "embedding_model"),
        ("experience", {"action": "something else"}, "(line)"),
        ("experience", {"source_memory": 999_999}, "source_memory"),
        ("experience", {"q_value": None}, "q_value"),
        ("experience_step", {"experience": 999_999}, "experience"),
        ("source_memory", {"surprise": 1}, "surprise"),
    ]
    for kind, changes, field_name in cases:
        bad, number = _bad(lines, kind, **changes)
        report = bank_import(lines=texts(bad), name="Bad copy")
        assert not report.ok, (kind, changes)
        assert [(e["line"], e["field"]) for e in report.errors if e["field"] == field_name] == [(number, field_name)], (
            changes, report.errors)
    assert not MemoryBank.objects.filter(name="Bad copy").exists()


def test_repeated_rows_are_refused(learned):
    lines = lines_of(learned)
    target = next(line for line in lines if line["type"] == "experience" and line["memory"] == "target")
    report = bank_import(lines=texts([*lines, target | {"key": 10**9}]), name="Twice")
    assert [(e["line"], e["field"]) for e in report.errors] == [(len(lines) + 1, "action_key")]
    step = next(line for line in lines if line["type"] == "experience_step")
    report = bank_import(lines=texts([*lines, step]), name="Twice")
    assert [(e["line"], e["field"]) for e in report.errors] == [(len(lines) + 1, "step")]


def test_a_bank_that_holds_dmrm_memory_is_not_imported_into(learned):
    first_dmrm = next(i for i, line in enumerate(lines_of(learned)) if line["type"] != "bank") + 1
    report = bank_import(lines=texts(lines_of(learned)), name=learned.name)
    assert (first_dmrm, "type") in {(e["line"], e["field"]) for e in report.errors}
    assert "already holds DMRM memory" in " ".join(e["message"] for e in report.errors)


def test_a_bank_copy_then_its_dmrm_copy_hold_the_memory_once(learned):
    """A run's set-up copies the bank, then its DMRM memory: the copy must not carry it already, and
    the DMRM copy holds what the file does (old code left the applied steps behind)."""
    copy = bank_copy(source=learned, name="Run copy")
    assert dmrm_counts(copy) == (0, 0, 0, 0, 0)
    dmrm_memory_copy(source=learned, target=copy)
    assert dmrm_counts(copy) == dmrm_counts(learned)
    steps = ExperienceStep.objects.filter(bank=copy).select_related("experience")
    assert {(s.step, s.experience.action, s.experience.bank_id) for s in steps} == {(0, "a0", copy.pk), (1, "a1", copy.pk)}


def test_a_bank_copied_by_its_job_holds_its_dmrm_memory_once(learned, operator_user,
                                                             django_capture_on_commit_callbacks):
    """The copy people ask for (page or API) is one job: the Orbs and the DMRM memory, as the file holds them."""
    with django_capture_on_commit_callbacks(execute=True):
        job = bank_copy_start(source=learned, name="Team copy", user=operator_user)
    job.refresh_from_db()
    copy = MemoryBank.objects.get(name="Team copy")
    assert job.status == "succeeded" and dmrm_counts(copy) == dmrm_counts(learned)
    assert job.result["written"] and copy.orbs.count() == learned.orbs.count()
