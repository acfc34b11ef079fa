"""A bulk decision on every Orb the review queue's filters match, on every page of it.

It is planned first (`bulk_plan`: the Orbs the action applies to, their banks, and a fingerprint of
their ids and versions) and shown to the reviewer, whose confirmation carries the fingerprint; the
decision then runs as a background job (memweb.jobs: at some tens of milliseconds an Orb, a request
could not hold it) on exactly the confirmed Orbs, all or none, as `orbs_bulk_review` decides a
selection. At most BULK_CAP Orbs at once: a larger set is refused, naming the cap, to be narrowed
by the filters.
"""
import hashlib
from dataclasses import dataclass

from django.urls import reverse

from memweb.jobs import JobContext, JobFailed, job_start
from memweb.models import Job
from orbs.errors import OrbsError
from orbs.models import Orb
from orbs.services.queue import OrbFilters, orbs_filtered
from orbs.services.review import orbs_bulk_review

BULK_CAP = 1000
BULK_JOB = "orbs.bulk_review"
# The statuses each bulk action applies to (orbs.services.review): other matching Orbs are left as they are.
BULK_ACTIONABLE = {"approve": (Orb.Status.PENDING, Orb.Status.REJECTED),
                   "reject": (Orb.Status.PENDING, Orb.Status.APPROVED)}
BULK_DONE = {"approve": "approved", "reject": "rejected"}


@dataclass(frozen=True)
class BulkPlan:
    """What "all matching" means at one moment: the (Orb id, version) pairs the action would take,
    the banks they are in, and how many Orbs matched in all."""

    action: str
    items: list[tuple[int, int]]
    banks: list[str]
    matching: int

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(",".join(f"{pk}:{version}" for pk, version in self.items).encode()).hexdigest()


def bulk_plan(*, action: str, filters: OrbFilters) -> BulkPlan:
    """The Orbs matching `filters` that `action` applies to; OrbsError when there are none, or more
    than BULK_CAP."""
    if action not in BULK_ACTIONABLE:
        raise OrbsError(f"unknown bulk action {action!r}; use approve or reject")
    matching = orbs_filtered(filters=filters)
    actionable = matching.filter(status__in=BULK_ACTIONABLE[action])
    count = actionable.count()
    if count > BULK_CAP:
        raise OrbsError(f"{count:,} matching Orbs could be {BULK_DONE[action]}, more than the {BULK_CAP:,} one decision "
                        "may take: narrow the filters (a bank, a source run, a domain) and decide them in parts")
    if not count:
        raise OrbsError(f"none of the Orbs matching the filters can be {BULK_DONE[action]}")
    items = list(actionable.order_by("pk").values_list("pk", "version"))
    banks = sorted(set(actionable.values_list("bank__name", flat=True)))
    return BulkPlan(action=action, items=items, banks=banks, matching=matching.count())


def bulk_review_start(*, plan: BulkPlan, reason: str, actor, workspace, queue_query: str) -> Job:
    """Queue the confirmed decision; the job's page follows it and links back to the queue as it was."""
    title = f"{plan.action.capitalize()} {len(plan.items)} Orbs of {', '.join(plan.banks)}"
    return job_start(kind=BULK_JOB, title=title, user=actor, workspace=workspace,
                     payload={"action": plan.action, "items": plan.items, "reason": reason, "queue_query": queue_query})


def bulk_review_job(context: JobContext, *, action: str, items: list, reason: str, queue_query: str) -> dict:
    """The job: one all-or-none decision (a stale Orb refuses it whole, as on the queue)."""
    context.progress(0, len(items), f"Deciding {len(items)} Orbs, all or none.")
    try:
        decided = orbs_bulk_review(action=action, items=[tuple(item) for item in items], actor=context.user,
                                   reason=reason)
    except OrbsError as refused:
        raise JobFailed(f"Nothing was changed. {refused}") from None
    queue = reverse("orbs:queue") + (f"?{queue_query}" if queue_query else "")
    return {"url": queue, "link_text": f"{len(decided)} Orbs {BULK_DONE[action]}: back to the review queue",
            "count": len(decided)}
