"""Copying a bank's DMRM memory into another bank (an evaluation run works on its own copy)."""
from django.db import transaction

from orbs.dmrm.models import DMRMSettings, Experience, ExperienceStep, ExperienceTrajectory, SourceMemory
from orbs.dmrm.services.learning import SETTINGS_FIELDS
from orbs.services.history import history_chain_unchained


def dmrm_memory_copy(*, source, target) -> int:
    """Copy `source`'s DMRM settings, source memories, experiences of both memories (vectors,
    Q-values, visits and review state kept), trajectory records and applied steps into `target`,
    in one transaction. Returns the experiences copied."""
    with transaction.atomic():
        settings = DMRMSettings.objects.filter(bank=source).values(*SETTINGS_FIELDS).first()
        if settings:
            DMRMSettings.objects.update_or_create(bank=target, defaults=settings)
        memories = {old.pk: _copied(old, target) for old in SourceMemory.objects.filter(bank=source)}
        experiences = list(Experience.objects.filter(bank=source))
        originals = [e.pk for e in experiences]
        for e in experiences:
            _moved(e, target, source_memory_id=memories[e.source_memory_id].pk if e.source_memory_id else None)
        Experience.objects.bulk_create(experiences, batch_size=500)  # PostgreSQL hands back the new ids
        copied = dict(zip(originals, (e.pk for e in experiences), strict=True))
        ExperienceTrajectory.objects.bulk_create(
            [_moved(t, target) for t in ExperienceTrajectory.objects.filter(bank=source)], batch_size=500)
        # The applied steps come too, so a step retried against the copy is not counted a second time.
        ExperienceStep.objects.bulk_create(
            [_moved(s, target, experience_id=copied.get(s.experience_id))
             for s in ExperienceStep.objects.filter(bank=source)], batch_size=500)
        history_chain_unchained(bank_id=target.pk)  # the copied source memories' builds
    return len(experiences)


def _moved(row, target, **changes):
    """`row` as an unsaved row of `target`."""
    row.pk, row.bank = None, target
    for name, value in changes.items():
        setattr(row, name, value)
    return row


def _copied(memory: SourceMemory, target) -> SourceMemory:
    copy = _moved(memory, target)
    copy.save()
    return copy
