"""Handing out work on demand: judging assignments and feedback-writing tasks.

Invariants: every item gets exactly N distinct annotators; nobody gets an item
twice; the items with the fewest assignments go first; an assignment left
unfinished past the campaign's timeout goes back to the pool. Concurrency: the
item row is locked (FOR UPDATE SKIP LOCKED) while its assignment is created, so
every writer of an item's assignments is serialised on that lock and re-counts
under it before inserting.
"""
from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.models import Assignment, Campaign, FeedbackTask, Item

_ATTEMPTS = 20


def _taken_count():
    """Assignments an item has that still count (open or completed)."""
    taken = (Assignment.objects.filter(item=OuterRef("pk")).exclude(status=Assignment.Status.EXPIRED)
             .order_by().values("item").annotate(n=Count("pk")).values("n"))
    return Coalesce(Subquery(taken), 0)


def items_available(*, campaign: Campaign, annotator):
    """Items this annotator may still be given: ready, not yet full, never
    theirs before, and not feedback they wrote themselves (they would know it)."""
    theirs = Assignment.objects.filter(item=OuterRef("pk"), annotator=annotator).exclude(
        status=Assignment.Status.EXPIRED)
    return (Item.objects.filter(campaign=campaign).exclude(human_feedback="")
            .exclude(human_feedback_author=annotator)
            .annotate(taken=_taken_count()).filter(taken__lt=campaign.annotators_per_item)
            .filter(~Exists(theirs)))


def assignments_reclaim(*, campaign: Campaign, now=None) -> int:
    """Expire open assignments idle for longer than the campaign's timeout."""
    cutoff = (now or timezone.now()) - campaign.timeout
    stale = Q(opened_at__lt=cutoff) | Q(opened_at__isnull=True, assigned_at__lt=cutoff)
    return (Assignment.objects.filter(campaign=campaign, status=Assignment.Status.ASSIGNED).filter(stale)
            .update(status=Assignment.Status.EXPIRED))


def assignment_active(*, campaign: Campaign, annotator) -> Assignment | None:
    return (Assignment.objects.filter(campaign=campaign, annotator=annotator, status=Assignment.Status.ASSIGNED)
            .select_related("item").first())


def assignment_next(*, campaign: Campaign, annotator, now=None) -> Assignment | None:
    """The annotator's open assignment if they have one (resume), else a new one,
    else None when nothing is left for them."""
    if not campaign.is_accepting_work(now):
        return None
    assignments_reclaim(campaign=campaign, now=now)
    for _ in range(_ATTEMPTS):
        active = assignment_active(campaign=campaign, annotator=annotator)
        if active:
            return active
        outcome = _assignment_try(campaign, annotator, skip_locked=True)
        if outcome is _ALL_LOCKED:
            # Every candidate is being handed out right now: wait for one rather
            # than tell this annotator the pool is empty.
            outcome = _assignment_try(campaign, annotator, skip_locked=False)
        if outcome is not _RETRY:
            return outcome
    return None


_RETRY, _ALL_LOCKED = object(), object()


def _assignment_try(campaign: Campaign, annotator, *, skip_locked: bool):
    try:
        with transaction.atomic():
            item = (items_available(campaign=campaign, annotator=annotator)
                    .select_for_update(skip_locked=skip_locked, of=("self",))
                    .order_by("taken", "pk").first())
            if item is None:
                return _ALL_LOCKED if skip_locked and _any_available(campaign, annotator) else None
            if not _count_current(item, annotator):
                return _RETRY  # our counts were read before someone else's commit
            return Assignment.objects.create(campaign=campaign, item=item, annotator=annotator)
    except IntegrityError:
        return _RETRY  # the same annotator's parallel request got there first


def _any_available(campaign: Campaign, annotator) -> bool:
    return items_available(campaign=campaign, annotator=annotator).exists()


def _count_current(item: Item, annotator) -> bool:
    """Re-count under the item lock (this read sees every committed assignment):
    if the count moved since the candidate query, its ordering is stale too,
    and picking this item could break the balance or the limit of N."""
    live = Assignment.objects.filter(item=item).exclude(status=Assignment.Status.EXPIRED)
    return live.count() == item.taken and not live.filter(annotator=annotator).exists()


def feedback_tasks_reclaim(*, campaign: Campaign, now=None) -> int:
    cutoff = (now or timezone.now()) - campaign.timeout
    return (FeedbackTask.objects.filter(campaign=campaign, status=FeedbackTask.Status.ASSIGNED,
                                        assigned_at__lt=cutoff)
            .update(status=FeedbackTask.Status.OPEN, writer=None, assigned_at=None))


def feedback_task_active(*, campaign: Campaign, writer) -> FeedbackTask | None:
    return (FeedbackTask.objects.filter(campaign=campaign, writer=writer, status=FeedbackTask.Status.ASSIGNED)
            .select_related("item").first())


def feedback_task_next(*, campaign: Campaign, writer, now=None) -> FeedbackTask | None:
    """The writer's task in hand, else the oldest open one, else None."""
    if not campaign.is_accepting_work(now):
        return None
    feedback_tasks_reclaim(campaign=campaign, now=now)
    for _ in range(_ATTEMPTS):
        active = feedback_task_active(campaign=campaign, writer=writer)
        if active:
            return active
        try:
            outcome = _feedback_task_claim(campaign, writer, now or timezone.now(), skip_locked=True)
            if outcome is _ALL_LOCKED:
                outcome = _feedback_task_claim(campaign, writer, now or timezone.now(), skip_locked=False)
        except IntegrityError:
            continue  # a parallel request of the same writer claimed one
        if outcome is not _RETRY:
            return outcome
    return None


@transaction.atomic
def _feedback_task_claim(campaign: Campaign, writer, now, *, skip_locked: bool):
    open_tasks = FeedbackTask.objects.filter(campaign=campaign, status=FeedbackTask.Status.OPEN)
    task = open_tasks.select_for_update(skip_locked=skip_locked).order_by("pk").first()
    if task is None:
        return _ALL_LOCKED if skip_locked and open_tasks.exists() else None
    task.status, task.writer, task.assigned_at = FeedbackTask.Status.ASSIGNED, writer, now
    task.save(update_fields=["status", "writer", "assigned_at"])
    return task
