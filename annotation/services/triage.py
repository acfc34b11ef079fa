"""An annotator passes on an item (skip) or reports it to the lead (flag), while writing feedback
or judging. Either way their turn at the item ends and it is never handed back to them; a skipped
item goes to someone else, a flagged one to nobody until the lead clears the flag (or withdraws
the item)."""
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from annotation.models import Assignment, Campaign, FeedbackTask, Flag, Item, Skip, Stage
from annotation.services.judging import SubmitError

MAX_REASON = 1000


def item_passed_by(annotator):
    """For Item querysets: the item was skipped or flagged by `annotator` (never theirs again)."""
    return (Exists(Skip.objects.filter(item=OuterRef("pk"), annotator=annotator))
            | Exists(Flag.objects.filter(item=OuterRef("pk"), flagged_by=annotator)))


def item_held():
    """For Item querysets: an open flag holds the item back from everyone."""
    return Exists(Flag.objects.filter(item=OuterRef("pk"), cleared_at__isnull=True))


def task_passed_by(writer):
    """For FeedbackTask querysets: the same two conditions, through the task's item."""
    return (Exists(Skip.objects.filter(item=OuterRef("item"), annotator=writer))
            | Exists(Flag.objects.filter(item=OuterRef("item"), flagged_by=writer))
            | Exists(Flag.objects.filter(item=OuterRef("item"), cleared_at__isnull=True)))


def assignment_skip(*, token, annotator, reason: str = "") -> Skip:
    reason = _reason_text(reason, field="skip_reason")
    with transaction.atomic():
        assignment = _assignment_in_hand(token, annotator)
        _assignment_release(assignment)
        return Skip.objects.create(campaign=assignment.campaign, item=assignment.item, annotator=annotator,
                                   stage=Stage.JUDGING, reason=reason)


def assignment_flag(*, token, annotator, reason: str, note: str = "") -> Flag:
    reason, note = _flag_validate(reason, note)
    with transaction.atomic():
        assignment = _assignment_in_hand(token, annotator)
        _assignment_release(assignment)
        return Flag.objects.create(campaign=assignment.campaign, item=assignment.item, flagged_by=annotator,
                                   stage=Stage.JUDGING, reason=reason, note=note)


def feedback_task_skip(*, token, writer, reason: str = "") -> Skip:
    reason = _reason_text(reason, field="skip_reason")
    with transaction.atomic():
        task = _task_in_hand(token, writer)
        _task_release(task)
        return Skip.objects.create(campaign=task.campaign, item=task.item, annotator=writer,
                                   stage=Stage.WRITING, reason=reason)


def feedback_task_flag(*, token, writer, reason: str, note: str = "") -> Flag:
    reason, note = _flag_validate(reason, note)
    with transaction.atomic():
        task = _task_in_hand(token, writer)
        _task_release(task)
        return Flag.objects.create(campaign=task.campaign, item=task.item, flagged_by=writer,
                                   stage=Stage.WRITING, reason=reason, note=note)


def _flag_validate(reason: str, note: str) -> tuple[str, str]:
    if reason not in Flag.Reason.values:
        raise SubmitError("flag_reason", "choose why you flag this item")
    note = _reason_text(note, field="flag_note")
    if reason == Flag.Reason.OTHER and not note:
        raise SubmitError("flag_note", "say what is wrong with the item when the reason is “other”")
    return reason, note


def _reason_text(text: str, *, field: str) -> str:
    text = (text or "").replace("\x00", "").strip()
    if len(text) > MAX_REASON:
        raise SubmitError(field, f"longer than {MAX_REASON} characters")
    return text


def _assignment_in_hand(token, annotator) -> Assignment:
    """The annotator's own open assignment, locked (anyone else's token raises DoesNotExist)."""
    assignment = (Assignment.objects.select_for_update(of=("self",)).select_related("item", "campaign")
                  .get(token=token, annotator=annotator))
    if assignment.status != Assignment.Status.ASSIGNED:
        raise SubmitError("assignment", "this item is no longer yours to judge (judged, or handed to others)")
    return assignment


def _assignment_release(assignment: Assignment) -> None:
    # Expired, as a timed-out assignment: the item's slot opens for the next annotator.
    assignment.status = Assignment.Status.EXPIRED
    assignment.save(update_fields=["status"])


def _task_in_hand(token, writer) -> FeedbackTask:
    task = (FeedbackTask.objects.select_for_update(of=("self",)).select_related("item", "campaign")
            .get(token=token))
    if task.status != FeedbackTask.Status.ASSIGNED or task.writer_id != writer.pk:
        raise SubmitError("task", "this conversation is no longer yours to write (written, or handed to others)")
    return task


def _task_release(task: FeedbackTask) -> None:
    task.status, task.writer, task.assigned_at = FeedbackTask.Status.OPEN, None, None
    task.save(update_fields=["status", "writer", "assigned_at"])


def flags_open(*, campaign: Campaign):
    """Open flags, oldest first, for the lead's list on the campaign page."""
    return (Flag.objects.filter(campaign=campaign, cleared_at__isnull=True)
            .select_related("item", "flagged_by").order_by("created_at", "pk"))


def flagged_item_ids(*, campaign: Campaign) -> set[int]:
    return set(flags_open(campaign=campaign).values_list("item_id", flat=True))


def flags_clear(*, item: Item, cleared_by) -> int:
    """The lead keeps the item: every open flag on it is cleared (kept, with who and when) and the
    item goes back to allocation. Returns how many were cleared."""
    return Flag.objects.filter(item=item, cleared_at__isnull=True).update(cleared_by=cleared_by,
                                                                         cleared_at=timezone.now())


def skips_count(*, campaign: Campaign) -> int:
    return Skip.objects.filter(campaign=campaign).count()

