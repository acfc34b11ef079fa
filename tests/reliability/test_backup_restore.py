"""`manage.py backup` and `manage.py restore` on the test database: what was backed up comes back
row for row and field for field (vectors included) after it was deleted and altered; a restore
over data needs --yes; a missing, corrupt or truncated file is refused and changes nothing."""
from pathlib import Path

import numpy
import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from annotation.models import Campaign, Judgment
from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import run_drive
from memweb.models import ApiKey
from orbs.models import Orb
from orbs.services import orbs_retrieve
from tests.annotation.conftest import annotators, make_campaign, make_items  # noqa: F401  (fixtures)
from tests.annotation.test_results import study  # noqa: F401  (fixture: a campaign with judgments)
from tests.evaluation.runs.conftest import launch  # noqa: F401  (fixture)
from tests.orbs.conftest import bank, make_orb  # noqa: F401  (fixtures)
from tests.orbs.test_transfer import busy_bank  # noqa: F401  (fixture: Orbs in every review state)

# pg_restore replaces tables, which a test transaction holding locks on them would block.
pytestmark = pytest.mark.django_db(transaction=True)


def comparable(value):
    """A field value as plain data: pgvector hands vectors back as numpy arrays."""
    return value.tolist() if isinstance(value, numpy.ndarray) else value


def stored_models() -> list:
    """Every model with a table of its own (many-to-many tables included), from the app registry:
    a model added later is compared without anyone listing it."""
    return [model for model in apps.get_models(include_auto_created=True)
            if model._meta.managed and not model._meta.proxy]


def database_snapshot() -> dict[str, list[tuple]]:
    """Every row of every model, every concrete field, in primary-key order."""
    snapshot = {}
    for model in stored_models():
        columns = [field.attname for field in model._meta.concrete_fields]
        rows = model.objects.order_by("pk").values_list(*columns)
        snapshot[model._meta.label] = [tuple(comparable(value) for value in row) for row in rows]
    return snapshot


@pytest.fixture
def filled(busy_bank, study, launch, operator_user):
    """A bank with Orbs in every review state, a played MemOrb run (its own bank, vectors,
    retrievals), a campaign with judgments, an API key."""
    run = run_drive(run=launch(memory_mode="memorb"))
    ApiKey.issue(user=operator_user, name="backed-up agent")
    campaign, _ = study
    assert Orb.objects.filter(bank=run.bank).exists()
    assert Judgment.objects.filter(assignment__campaign=campaign).exists()
    return run, campaign


def test_it_restores_every_row_and_field_after_deletes_and_edits(filled, busy_bank, tmp_path):
    run, campaign = filled
    before = database_snapshot()
    dump = tmp_path / "memweb.dump"
    call_command("backup", str(dump))
    assert dump.stat().st_mode & 0o077 == 0  # password and key hashes: owner-only

    orb = Orb.objects.filter(bank=busy_bank).first()
    Orb.objects.filter(pk=orb.pk).update(vector=[0.5] * len(orb.vector), outcome="edited after the backup")
    EvaluationRun.objects.filter(pk=run.pk).delete()
    Campaign.objects.filter(pk=campaign.pk).delete()
    get_user_model().objects.create_user("arrived-after-the-backup")
    assert database_snapshot() != before

    call_command("restore", str(dump), yes=True)
    assert database_snapshot() == before
    # Sequences came back too: new rows take fresh ids, and the vector index answers.
    get_user_model().objects.create_user("arrived-after-the-restore")
    assert orbs_retrieve(bank=busy_bank, query="my dryer is slow", context={}, approved_only=False).hits


def test_it_refuses_to_restore_over_data_without_yes(busy_bank, tmp_path):
    dump = tmp_path / "memweb.dump"
    call_command("backup", str(dump))
    get_user_model().objects.create_user("kept-because-no-yes")
    before = database_snapshot()
    with pytest.raises(CommandError, match="holds data .* --yes"):
        call_command("restore", str(dump))
    assert database_snapshot() == before


def _truncated(dump: Path, target: Path) -> Path:
    """The dump without its last kilobyte: the table of contents reads, the last table's data does not."""
    data = dump.read_bytes()
    target.write_bytes(data[:-1024])
    return target


def test_it_refuses_missing_corrupt_and_truncated_files_and_changes_nothing(busy_bank, tmp_path):
    dump = tmp_path / "memweb.dump"
    call_command("backup", str(dump))
    get_user_model().objects.create_user("arrived-after-the-backup")
    before = database_snapshot()
    garbage = tmp_path / "garbage.dump"
    garbage.write_bytes(b"PGDMP" + bytes(range(256)) * 40)
    refusals = {
        tmp_path / "missing.dump": "no backup file",
        garbage: "not a readable backup",
        _truncated(dump, tmp_path / "truncated.dump"): "rolled back; the database is unchanged",
    }
    for path, message in refusals.items():
        with pytest.raises(CommandError, match=message):
            call_command("restore", str(path), yes=True)
        assert database_snapshot() == before, path.name


def test_backup_names_the_problem_with_its_target(tmp_path):
    with pytest.raises(CommandError, match="does not exist"):
        call_command("backup", str(tmp_path / "no-such-folder" / "memweb.dump"))
    with pytest.raises(CommandError, match="is a folder"):
        call_command("backup", str(tmp_path))
    assert list(tmp_path.iterdir()) == []  # no partial file left behind
