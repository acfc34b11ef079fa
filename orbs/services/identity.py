"""An Orb's stable identity across its revisions.

An edit that changes obs, emotion or outcome writes a new row (its own content hash and vector) and
marks the old one superseded; every row of one Orb shares its `lineage`, the first revision, whose
id is the Orb's stable id. Clients hold that id: any revision's id, or the stable id, names the Orb,
and reading it answers its current revision (the highest revision number).
"""
from django.db.models import Exists, OuterRef, QuerySet

from orbs.models import Orb


def orb_current(*, orb_id: int, queryset: QuerySet | None = None) -> Orb:
    """The current revision of the Orb that `orb_id` names (its stable id or any revision's id).
    Raises Orb.DoesNotExist."""
    lineage = Orb.objects.filter(pk=orb_id).values("lineage_id")[:1]
    current = (Orb.objects if queryset is None else queryset).filter(lineage_id=lineage).order_by("-revision").first()
    if current is None:
        raise Orb.DoesNotExist(f"No Orb #{orb_id}")
    return current


def orb_revision(*, orb_id: int, revision: int, queryset: QuerySet | None = None) -> Orb:
    """Revision number `revision` of the Orb that `orb_id` names. Raises Orb.DoesNotExist."""
    lineage = Orb.objects.filter(pk=orb_id).values("lineage_id")[:1]
    return (Orb.objects if queryset is None else queryset).get(lineage_id=lineage, revision=revision)


def orb_revisions(*, orb: Orb) -> list[Orb]:
    """Every revision of `orb`'s Orb, oldest first."""
    return list(Orb.objects.select_related("bank", "reviewer", "episode").filter(lineage_id=orb.lineage_id)
                .order_by("revision"))


def orbs_current_only(queryset: QuerySet) -> QuerySet:
    """The rows of `queryset` that are their Orb's current revision (no later revision exists)."""
    later = Orb.objects.filter(lineage_id=OuterRef("lineage_id"), revision__gt=OuterRef("revision"))
    return queryset.filter(~Exists(later))


def orbs_lineages_rebuild(*, orb_ids: list[int]) -> None:
    """Give rows written with their `supersedes` links (an imported bank file) their lineage and
    revision number, by walking each one's chain back to its first revision."""
    previous = dict(Orb.objects.filter(pk__in=orb_ids).values_list("pk", "supersedes_id"))
    for pk in previous:
        chain = [pk]
        while previous.get(chain[-1]) is not None:
            chain.append(previous[chain[-1]])
        Orb.objects.filter(pk=pk).update(lineage_id=chain[-1], revision=len(chain))
