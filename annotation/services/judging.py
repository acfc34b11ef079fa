"""Recording judgments and written feedback. Both are idempotent: a second
submit of the same work returns what the first one stored."""
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from annotation.models import Assignment, Campaign, FeedbackTask, Flag, Judgment, Reaction, Skip
from annotation.services.quality import participant_score
from annotation.services.roster import annotator_allowed

MAX_COMMENT = 5000
MAX_FEEDBACK = 10_000
MAX_TIME_MS = 24 * 3600 * 1000


class SubmitError(ValueError):
    """Bad input or a submit that can no longer be accepted; names the field."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field, self.reason = field, reason


@dataclass(frozen=True)
class Submitted:
    judgment: Judgment
    created: bool


def side_options(campaign: Campaign) -> tuple[str, ...]:
    return ("A", "B", "tie") if campaign.allow_ties else ("A", "B")


def choices_validate(*, campaign: Campaign, choices: dict) -> dict[str, str]:
    options = side_options(campaign)
    for key in campaign.criterion_keys:
        if choices.get(key) not in options:
            raise SubmitError(key, f"choose one of {', '.join(options)}")
    extra = sorted(set(choices) - set(campaign.criterion_keys))
    if extra:
        raise SubmitError(extra[0], "not a criterion of this campaign")
    return {key: choices[key] for key in campaign.criterion_keys}


def rating_validate(*, score, action, required: bool) -> tuple[int | None, str]:
    """A person's own satisfaction (1-10) and like/dislike/none; both or neither unless required, since
    a rating is compared whole with the simulated user's (score and reaction together)."""
    if score in (None, "") and not action and not required:
        return None, ""
    number = _score_number(score)
    if number is None:
        only_reaction = score in (None, "") and not required
        raise SubmitError("score", "you chose a reaction: give a satisfaction score from 1 to 10 too" if only_reaction
                          else "give a satisfaction score from 1 to 10")
    if action not in Reaction.values:
        raise SubmitError("action", f"choose a reaction: {_reaction_names()}" if required
                          else f"you gave a satisfaction score: choose a reaction too ({_reaction_names()}), "
                               "or set the score back to “no score”")
    return number, action


def _score_number(score) -> int | None:
    try:
        number = int(score)
    except (TypeError, ValueError):
        return None
    if isinstance(score, bool) or str(score).strip() != str(number) or not 1 <= number <= 10:
        return None
    return number


def _reaction_names() -> str:
    *others, last = Reaction.labels
    return f"{', '.join(others)} or {last}"


def judgment_submit(*, token, annotator, choices: dict, comment: str = "", time_spent_ms: int = 0,
                    score=None, action: str = "") -> Submitted:
    """Store the annotator's judgment for the assignment `token` (theirs only:
    anyone else's token raises Assignment.DoesNotExist). The optional score and
    action are the annotator's own rating of the conversation."""
    comment = (comment or "").strip()
    if len(comment) > MAX_COMMENT:
        raise SubmitError("comment", f"longer than {MAX_COMMENT} characters")
    score, action = rating_validate(score=score, action=action, required=False)
    with transaction.atomic():
        assignment = (Assignment.objects.select_for_update(of=("self",)).select_related("item", "campaign")
                      .get(token=token, annotator=annotator))
        existing = Judgment.objects.filter(assignment=assignment).first()
        if existing:
            return Submitted(existing, created=False)
        valid = choices_validate(campaign=assignment.campaign, choices=choices)
        _accepting_check(assignment)
        judgment = Judgment.objects.create(
            assignment=assignment, choices=valid, comment=comment, time_spent_ms=_clamp_ms(time_spent_ms),
            preferences={key: assignment.source_of(side) for key, side in valid.items()}, score=score, action=action,
        )
        assignment.status, assignment.completed_at = Assignment.Status.COMPLETED, timezone.now()
        assignment.save(update_fields=["status", "completed_at"])
        if assignment.item.is_attention:
            participant_score(campaign=assignment.campaign, annotator=annotator)
    return Submitted(judgment, created=True)


def _accepting_check(assignment: Assignment) -> None:
    if assignment.campaign.status == Campaign.Status.CLOSED:
        raise SubmitError("campaign", "the campaign is closed")
    _still_theirs_check(assignment.campaign, assignment.item_id, assignment.annotator)
    if assignment.status == Assignment.Status.EXPIRED and not _revivable(assignment):
        raise SubmitError("assignment", "this assignment timed out and its item went to other annotators")


def _still_theirs_check(campaign: Campaign, item_id: int, person) -> None:
    """A late submit from someone the roster no longer names, or on an item they skipped or flagged,
    would undo the release that handed the item to others."""
    if not annotator_allowed(campaign=campaign, annotator=person):
        raise SubmitError("roster", "you are no longer on this campaign's roster")
    if (Skip.objects.filter(item_id=item_id, annotator=person).exists()
            or Flag.objects.filter(item_id=item_id, flagged_by=person).exists()):
        raise SubmitError("assignment", "you skipped or flagged this item, so it went to other annotators")


def _revivable(assignment: Assignment) -> bool:
    """A late submit still counts if the item has room and the annotator holds
    no newer assignment for it. The item row lock serialises this with allocation."""
    item = type(assignment.item).objects.select_for_update().get(pk=assignment.item_id)
    live = Assignment.objects.filter(item=item).exclude(status=Assignment.Status.EXPIRED)
    return live.count() < assignment.campaign.annotators_per_item and not live.filter(
        annotator_id=assignment.annotator_id).exists()


def _clamp_ms(value) -> int:
    try:
        return max(0, min(int(value or 0), MAX_TIME_MS))
    except (TypeError, ValueError):
        return 0


def assignment_open(*, assignment: Assignment) -> None:
    """Note when the annotator first saw the item (server-side timing)."""
    if assignment.opened_at is None:
        Assignment.objects.filter(pk=assignment.pk, opened_at__isnull=True).update(opened_at=timezone.now())
        assignment.refresh_from_db(fields=["opened_at"])


def feedback_task_submit(*, token, writer, text: str, time_spent_ms: int = 0, score=None, action: str = "",
                         rating_required: bool = False) -> FeedbackTask:
    """Store the writer's feedback as the item's human feedback (this is what
    opens the item for pairwise judging) with their own score and action, which
    the pages and the API require."""
    text = (text or "").strip()
    if not text:
        raise SubmitError("text", "write the feedback before submitting")
    if len(text) > MAX_FEEDBACK:
        raise SubmitError("text", f"longer than {MAX_FEEDBACK} characters")
    score, action = rating_validate(score=score, action=action, required=rating_required)
    with transaction.atomic():
        task = FeedbackTask.objects.select_for_update(of=("self",)).select_related("item", "campaign").get(token=token)
        if task.status == FeedbackTask.Status.DONE and task.writer_id == writer.pk:
            return task
        _writable_check(task, writer)
        _feedback_store(task, writer, text, time_spent_ms)
        task.score, task.action = score, action
        task.save(update_fields=["score", "action"])
    return task


def _writable_check(task: FeedbackTask, writer) -> None:
    if task.campaign.status == Campaign.Status.CLOSED:
        raise SubmitError("campaign", "the campaign is closed")
    _still_theirs_check(task.campaign, task.item_id, writer)
    if task.status == FeedbackTask.Status.DONE or (task.writer_id not in (None, writer.pk)):
        raise SubmitError("task", "this task timed out and went to another annotator")


def _feedback_store(task: FeedbackTask, writer, text: str, time_spent_ms) -> None:
    task.status, task.writer, task.text = FeedbackTask.Status.DONE, writer, text
    task.completed_at, task.time_spent_ms = timezone.now(), _clamp_ms(time_spent_ms)
    task.save(update_fields=["status", "writer", "text", "completed_at", "time_spent_ms"])
    item = task.item
    item.human_feedback, item.human_feedback_author = text, writer
    item.save(update_fields=["human_feedback", "human_feedback_author"])
