"""Reading a bank's DMRM memory for programs: experiences by filter, and the counts of its stats."""
from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from orbs.dmrm.models import Experience, ExperienceTrajectory, SourceMemory


@dataclass(frozen=True)
class ExperienceFilters:
    memory: str = ""  # "target" or "source"
    status: str = ""
    source_memory: str = ""  # the source memory's name
    domain: str = ""
    text: str = ""  # in the action
    flagged: bool = False


def experiences_filtered(*, bank, filters: ExperienceFilters) -> QuerySet:
    """The bank's experiences matching every given filter, newest first, without their vectors;
    deleted ones only when the status filter asks for them."""
    queryset = Experience.objects.filter(bank=bank).select_related("source_memory", "reviewer").defer("vector")
    exact = {"memory": filters.memory, "status": filters.status, "source_memory__name": filters.source_memory,
             "domain": filters.domain}
    queryset = queryset.filter(**{name: value for name, value in exact.items() if value})
    if filters.status != Experience.Status.DELETED:
        # Deleted experiences are shown only to whoever asks for them by status.
        queryset = queryset.exclude(status=Experience.Status.DELETED)
    if filters.text.strip():
        queryset = queryset.filter(action__icontains=filters.text.strip())
    if filters.flagged:
        queryset = queryset.filter(flagged_at__isnull=False)
    return queryset


def dmrm_stats(*, bank) -> dict:
    """How much DMRM memory the bank holds: experiences of each memory, trajectories written to the
    target memory (and how many succeeded, which drives source suppression), source memories."""
    experiences = Experience.objects.filter(bank=bank).aggregate(
        target=Count("pk", filter=Q(memory=Experience.Memory.TARGET)),
        source=Count("pk", filter=Q(memory=Experience.Memory.SOURCE)),
        flagged=Count("pk", filter=Q(flagged_at__isnull=False)),
    )
    trajectories = ExperienceTrajectory.objects.filter(bank=bank).aggregate(
        total=Count("pk"), successful=Count("pk", filter=Q(success=True)))
    return {
        "target_experiences": experiences["target"], "source_experiences": experiences["source"],
        "flagged_experiences": experiences["flagged"], "trajectories": trajectories["total"],
        "successful_trajectories": trajectories["successful"],
        "source_memories": SourceMemory.objects.filter(bank=bank).count(),
    }
