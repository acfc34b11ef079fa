"""Quality control: attention-check standing per annotator (warn, then exclude;
operators can override either way) and balanced sides per item."""
import random

from django.db import transaction
from django.utils import timezone

from annotation.models import Assignment, Campaign, Judgment, Participant, coin_flip

OPERATOR_DECISIONS = ("exclude", "include", "auto")


def side_balanced(*, item, draw: random.Random | None = None) -> bool:
    """side_a_is_human for the item's next assignment: the side used less so far,
    a coin flip on a tie, so N >= 2 annotators never all see the human side in one place.
    `draw` replaces the unpredictable coin where repeatability matters (the demo)."""
    live = Assignment.objects.filter(item=item).exclude(status=Assignment.Status.EXPIRED)
    human_a = live.filter(side_a_is_human=True).count()
    simulated_a = live.count() - human_a
    if human_a == simulated_a:
        return draw.random() < 0.5 if draw else coin_flip()
    return human_a < simulated_a


def attention_due(*, campaign: Campaign, annotator) -> bool:
    """Whether the annotator's next item should be an attention check: checks are
    spread so that about `attention_rate` of everything they get is one."""
    if campaign.attention_rate <= 0:
        return False
    theirs = Assignment.objects.filter(campaign=campaign, annotator=annotator).exclude(
        status=Assignment.Status.EXPIRED)
    checks = theirs.filter(item__is_attention=True).count()
    return checks < int(campaign.attention_rate * (theirs.count() + 1))


def check_passed(*, expected: dict, preferences: dict) -> bool:
    """An attention check passes only if every expected criterion was answered as expected."""
    return all(preferences.get(key) == answer for key, answer in expected.items())


def participant_score(*, campaign: Campaign, annotator) -> Participant:
    """Recount the annotator's attention checks and set their standing (unless an
    operator decided it). Recounting, not incrementing, keeps it idempotent."""
    participant, _ = Participant.objects.select_for_update().get_or_create(campaign=campaign, annotator=annotator)
    checks = Judgment.objects.filter(assignment__campaign=campaign, assignment__annotator=annotator,
                                     assignment__item__is_attention=True).values_list(
        "preferences", "assignment__item__gold_expected")
    results = [check_passed(expected=expected, preferences=preferences) for preferences, expected in checks]
    participant.attention_correct, participant.attention_total = sum(results), len(results)
    if not participant.set_by_operator:
        participant.standing = _standing(campaign, participant)
    participant.updated_at = timezone.now()
    participant.save(update_fields=["attention_correct", "attention_total", "standing", "updated_at"])
    return participant


def _standing(campaign: Campaign, participant: Participant) -> str:
    accuracy = participant.attention_accuracy
    if accuracy is None:
        return Participant.Standing.GOOD
    if participant.attention_total >= campaign.attention_min_checks and accuracy < campaign.attention_exclude_below:
        return Participant.Standing.EXCLUDED
    return Participant.Standing.WARNED if accuracy < campaign.attention_warn_below else Participant.Standing.GOOD


@transaction.atomic
def participant_decide(*, campaign: Campaign, annotator, decision: str) -> Participant:
    """An operator's call: "exclude", "include" (reinstate), or "auto" (back to the attention-check rule).
    Judgments are never deleted, so every decision can be reversed."""
    if decision not in OPERATOR_DECISIONS:
        raise ValueError(f"decision must be one of {', '.join(OPERATOR_DECISIONS)}")
    participant = participant_score(campaign=campaign, annotator=annotator)
    if decision == "auto":
        participant.set_by_operator = False
        participant.standing = _standing(campaign, participant)
    else:
        participant.set_by_operator = True
        participant.standing = (Participant.Standing.EXCLUDED if decision == "exclude"
                                else Participant.Standing.GOOD)
    participant.save(update_fields=["set_by_operator", "standing"])
    return participant


def excluded_ids(*, campaign: Campaign) -> set[int]:
    return set(Participant.objects.filter(campaign=campaign, standing=Participant.Standing.EXCLUDED)
               .values_list("annotator_id", flat=True))


def participant_standing(*, campaign: Campaign, annotator) -> Participant | None:
    return Participant.objects.filter(campaign=campaign, annotator=annotator).first()

