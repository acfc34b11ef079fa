"""Handing out work on demand: judging assignments and feedback-writing tasks.

Invariants: every item gets exactly N distinct annotators (under the
max-disagreement strategy, an item whose votes split gets more, up to the
campaign's cap); nobody gets an item twice; the items with the fewest
assignments go first; an excluded annotator's assignments do not count and they
get no more work; attention checks are handed out at the campaign's rate and
outside the N limit; each item's sides are balanced across its annotators; an
assignment left unfinished past the campaign's timeout goes back to the pool. Concurrency: the
item row is locked (FOR UPDATE SKIP LOCKED) while its assignment is created, so
every writer of an item's assignments is serialised on that lock and re-counts
under it before inserting.
"""
from django.db import IntegrityError, transaction
from django.db.models import Case, Count, Exists, F, IntegerField, OuterRef, Q, Subquery, Value, When
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from annotation.models import Assignment, Campaign, FeedbackTask, Item, Judgment
from annotation.services.quality import attention_due, excluded_ids, side_balanced
from annotation.services.roster import annotator_allowed
from annotation.services.triage import item_held, item_passed_by, task_passed_by

_ATTEMPTS = 20


def assignments_counted(campaign: Campaign):
    """Assignments that still count: open or completed, by an annotator who is not excluded."""
    return Assignment.objects.exclude(status=Assignment.Status.EXPIRED).exclude(
        annotator_id__in=excluded_ids(campaign=campaign))


def _taken_count(campaign: Campaign):
    taken = (assignments_counted(campaign).filter(item=OuterRef("pk"))
             .order_by().values("item").annotate(n=Count("pk")).values("n"))
    return Coalesce(Subquery(taken), 0)


def _completed_count(campaign: Campaign):
    completed = (assignments_counted(campaign).filter(item=OuterRef("pk"), status=Assignment.Status.COMPLETED)
                 .order_by().values("item").annotate(n=Count("pk")).values("n"))
    return Coalesce(Subquery(completed), 0)


def items_with_judgment_counts(*, campaign: Campaign, items=None):
    """The campaign's items with `judged` (completed judgments that count: none by an excluded
    annotator) and `needed`, from the same rule that allocates them: N, or the cap for a split item;
    more only where an annotator let back in had judged an item given meanwhile to another. So judged
    never exceeds needed. Attention checks go to everyone, outside N: their `needed` is None."""
    items = campaign.items.all() if items is None else items
    judged = _completed_count(campaign)
    needed = Case(When(is_attention=True, then=Value(None)), default=Greatest(_target(campaign), judged),
                  output_field=IntegerField())
    return items.annotate(judged=judged, needed=needed)


def _target(campaign: Campaign):
    """How many annotators each item needs: N, or the cap for split items under max-disagreement."""
    if campaign.assignment_strategy != Campaign.Strategy.MAX_DISAGREEMENT:
        return Value(campaign.annotators_per_item)
    split = split_item_ids(campaign=campaign)
    cap = max(campaign.max_annotators_per_item, campaign.annotators_per_item)
    return Case(When(pk__in=split, then=Value(cap)), default=Value(campaign.annotators_per_item),
                output_field=IntegerField())


def split_item_ids(*, campaign: Campaign) -> list[int]:
    """Items with at least N counted judgments whose votes are not unanimous on some criterion."""
    votes: dict[int, list[dict]] = {}
    for item_id, preferences in (Judgment.objects.filter(assignment__in=assignments_counted(campaign),
                                                         assignment__campaign=campaign,
                                                         assignment__item__is_attention=False)
                                 .values_list("assignment__item_id", "preferences")):
        votes.setdefault(item_id, []).append(preferences)
    return [item_id for item_id, prefs in votes.items() if len(prefs) >= campaign.annotators_per_item
            and any(len({p[key] for p in prefs}) > 1 for key in campaign.criterion_keys)]


def _pool(campaign: Campaign, annotator):
    """Ready items never theirs before, not feedback they wrote themselves (they would know it),
    not one they skipped or flagged, and none held by an open flag."""
    theirs = Assignment.objects.filter(item=OuterRef("pk"), annotator=annotator).exclude(
        status=Assignment.Status.EXPIRED)
    return (Item.objects.filter(campaign=campaign).exclude(human_feedback="")
            .exclude(human_feedback_author=annotator).filter(~Exists(theirs))
            .exclude(item_passed_by(annotator)).exclude(item_held()))


def items_available(*, campaign: Campaign, annotator):
    """Items this annotator may still be given: the pool, not yet full, attention checks aside;
    none for an excluded annotator or one the campaign's roster leaves out."""
    available = (_pool(campaign, annotator).filter(is_attention=False)
                 .annotate(taken=_taken_count(campaign), target=_target(campaign)).filter(taken__lt=F("target")))
    if annotator.pk in excluded_ids(campaign=campaign) or not annotator_allowed(campaign=campaign, annotator=annotator):
        return available.none()
    return available


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
    if not campaign.is_accepting_work(now) or not annotator_allowed(campaign=campaign, annotator=annotator):
        return None
    assignments_reclaim(campaign=campaign, now=now)
    for _ in range(_ATTEMPTS):
        active = assignment_active(campaign=campaign, annotator=annotator)
        if active:
            return active
        check = _attention_try(campaign, annotator)
        if check is not None:
            return check
        outcome = _assignment_try(campaign, annotator, skip_locked=True)
        if outcome is _ALL_LOCKED:
            # Every candidate is being handed out right now: wait for one rather
            # than tell this annotator the pool is empty.
            outcome = _assignment_try(campaign, annotator, skip_locked=False)
        if outcome is not _RETRY:
            return outcome
    return None


_RETRY, _ALL_LOCKED = object(), object()


def _attention_try(campaign: Campaign, annotator) -> Assignment | None:
    """An attention check they have not seen, when one is due; any number of
    annotators may take the same check, so no item lock is needed."""
    if not attention_due(campaign=campaign, annotator=annotator):
        return None
    if annotator.pk in excluded_ids(campaign=campaign):
        return None
    item = _pool(campaign, annotator).filter(is_attention=True).order_by("pk").first()
    if item is None:
        return None
    try:
        with transaction.atomic():
            return Assignment.objects.create(campaign=campaign, item=item, annotator=annotator,
                                             side_a_is_human=side_balanced(item=item))
    except IntegrityError:
        return None  # a parallel request of theirs took it; the loop resumes that one


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
            return Assignment.objects.create(campaign=campaign, item=item, annotator=annotator,
                                             side_a_is_human=side_balanced(item=item))
    except IntegrityError:
        return _RETRY  # the same annotator's parallel request got there first


def _any_available(campaign: Campaign, annotator) -> bool:
    return items_available(campaign=campaign, annotator=annotator).exists()


def _count_current(item: Item, annotator) -> bool:
    """Re-count under the item lock (this read sees every committed assignment):
    if the count moved since the candidate query, its ordering is stale too,
    and picking this item could break the balance or the limit of N."""
    live = assignments_counted(item.campaign).filter(item=item)
    mine = Assignment.objects.filter(item=item, annotator=annotator).exclude(status=Assignment.Status.EXPIRED)
    return live.count() == item.taken and not mine.exists()


def feedback_tasks_reclaim(*, campaign: Campaign, now=None) -> int:
    cutoff = (now or timezone.now()) - campaign.timeout
    return (FeedbackTask.objects.filter(campaign=campaign, status=FeedbackTask.Status.ASSIGNED,
                                        assigned_at__lt=cutoff)
            .update(status=FeedbackTask.Status.OPEN, writer=None, assigned_at=None))


def feedback_task_active(*, campaign: Campaign, writer) -> FeedbackTask | None:
    return (FeedbackTask.objects.filter(campaign=campaign, writer=writer, status=FeedbackTask.Status.ASSIGNED)
            .select_related("item").first())


def feedback_task_next(*, campaign: Campaign, writer, now=None) -> FeedbackTask | None:
    """The writer's task in hand, else the oldest open one they may take, else None."""
    if not campaign.is_accepting_work(now) or not annotator_allowed(campaign=campaign, annotator=writer):
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
    open_tasks = feedback_tasks_open_for(campaign=campaign, writer=writer)
    task = open_tasks.select_for_update(skip_locked=skip_locked).order_by("pk").first()
    if task is None:
        return _ALL_LOCKED if skip_locked and open_tasks.exists() else None
    task.status, task.writer, task.assigned_at = FeedbackTask.Status.ASSIGNED, writer, now
    task.save(update_fields=["status", "writer", "assigned_at"])
    return task


def feedback_tasks_open_for(*, campaign: Campaign, writer):
    """Open feedback tasks `writer` may take: not on an item they skipped or flagged, nor a held one."""
    return (FeedbackTask.objects.filter(campaign=campaign, status=FeedbackTask.Status.OPEN)
            .exclude(task_passed_by(writer)))


def judging_position(*, assignment: Assignment, annotator) -> tuple[int, int]:
    """(n, N) for "item n of N for you in this campaign": N counts what they judged, what they hold
    and what is still waiting for them, so it moves as other annotators fill items."""
    campaign = assignment.campaign
    theirs = Assignment.objects.filter(campaign=campaign, annotator=annotator)
    completed = theirs.filter(status=Assignment.Status.COMPLETED)
    done = completed.count()
    if assignment.status == Assignment.Status.COMPLETED:
        position = completed.filter(pk__lte=assignment.pk).count()
    else:
        position = done + 1
    total = done + theirs.filter(status=Assignment.Status.ASSIGNED).count() + items_available(
        campaign=campaign, annotator=annotator).count()
    return position, max(total, position)


def writing_position(*, task: FeedbackTask, writer) -> tuple[int, int]:
    """(n, N) for the feedback-writing page, counted as judging_position is."""
    campaign = task.campaign
    written = FeedbackTask.objects.filter(campaign=campaign, writer=writer, status=FeedbackTask.Status.DONE)
    done = written.count()
    position = written.filter(pk__lte=task.pk).count() if task.status == FeedbackTask.Status.DONE else done + 1
    held = FeedbackTask.objects.filter(campaign=campaign, writer=writer, status=FeedbackTask.Status.ASSIGNED).count()
    total = done + held + feedback_tasks_open_for(campaign=campaign, writer=writer).count()
    return position, max(total, position)
