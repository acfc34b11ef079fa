"""Audit rows of every kind (an Orb's review events, a bank's events, an experience's events) are
written once: changing or deleting one through the model is refused."""
import pytest

from orbs.dmrm.models import ExperienceEvent
from orbs.dmrm.services import experience_delete, experiences_append_batch
from orbs.dmrm.services.learning import Transition
from orbs.models import BankEvent, ReviewEvent
from orbs.services.deletion import bank_archive


def _experience_event(bank) -> ExperienceEvent:
    step = Transition(trajectory_id="t-1", step=0, goal="return the kettle", observation="it arrived broken",
                      action="get_order", reward=1.0, done=True, success=True)
    [experience] = experiences_append_batch(bank=bank, transitions=[step])
    experience_delete(experience_id=experience.pk, expected_version=experience.version, actor=None, reason="test")
    return ExperienceEvent.objects.get()


@pytest.mark.parametrize("make_row", [
    lambda bank, make_orb: ReviewEvent.objects.filter(orb=make_orb("My kettle broke.", approve=False)).first(),
    lambda bank, make_orb: (bank_archive(bank=bank, actor=None, reason="test"), BankEvent.objects.get())[1],
    lambda bank, make_orb: _experience_event(bank),
], ids=["review event", "bank event", "experience event"])
def test_an_audit_row_cannot_be_changed_or_deleted(make_row, bank, make_orb):
    row = make_row(bank, make_orb)
    row.note = "rewritten afterwards"
    with pytest.raises(ValueError, match="are append-only"):
        row.save()
    with pytest.raises(ValueError, match="are append-only"):
        row.delete()
    assert type(row).objects.get(pk=row.pk).note != "rewritten afterwards"
