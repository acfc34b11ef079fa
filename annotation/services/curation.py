"""A campaign's items after intake: conversations that other parts of memweb add (each source
once), search over them, and edits or withdrawal while nobody has judged them yet."""
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import F, Q, TextField
from django.db.models.functions import Cast

from annotation.models import Assignment, Campaign, Item
from annotation.services.allocation import items_with_judgment_counts
from annotation.services.intake import FIELDS, ImportReport, RowErrors, items_from_conversations, row_values

# What an operator may correct before judging; the conversation itself and the written human
# feedback stay as they came (the feedback writer's text is theirs).
EDITABLE = ("task_description", "evaluation_context", "simulated_feedback", "language", "task_format", "domain")
STAGES = (("needs_feedback", "needs human feedback"), ("ready", "ready, not judged yet"),
          ("judging", "being judged"), ("complete", "judged by enough annotators"))


@dataclass
class ConversationsAdded:
    report: ImportReport
    duplicates: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.report.ok


def conversations_add(*, campaign: Campaign, conversations: list[dict]) -> ConversationsAdded:
    """items_from_conversations, refusing each conversation whose source_ref the campaign holds
    already (named in `duplicates`) instead of failing the whole batch on it."""
    refs = [conversation.get("source_ref", "") for conversation in conversations]
    held = set(campaign.items.filter(source_ref__in=[ref for ref in refs if ref])
               .values_list("source_ref", flat=True))
    fresh = [conversation for conversation in conversations if conversation.get("source_ref", "") not in held]
    duplicates = [ref for ref in refs if ref in held]
    if not fresh:
        return ConversationsAdded(ImportReport(), duplicates)
    return ConversationsAdded(items_from_conversations(campaign=campaign, conversations=fresh), duplicates)


def items_browse(*, campaign: Campaign, q: str = "", stage: str = "", **facets):
    """The campaign's items with their judgment counts, searched over the conversation, task
    and source, and filtered by facet (language, task_format, domain) and stage."""
    items = items_with_judgment_counts(campaign=campaign)
    items = items.filter(**{name: value for name, value in facets.items() if value})
    if q.strip():
        text = q.strip()
        items = items.annotate(conversation_text=Cast("conversation", TextField())).filter(
            Q(conversation_text__icontains=text) | Q(task_description__icontains=text)
            | Q(source_ref__icontains=text) | Q(source_label__icontains=text))
    return _staged(items, stage).order_by("pk")


def _staged(items, stage: str):
    ready = ~Q(human_feedback="")
    return {
        "needs_feedback": items.filter(human_feedback=""),
        "ready": items.filter(ready, judged=0),
        "judging": items.filter(ready, judged__gt=0, judged__lt=F("needed")),
        "complete": items.filter(ready, judged__gte=F("needed")),
    }.get(stage, items)


class ItemLocked(ValueError):
    """The item has been judged (or is being judged): changing it would change what was judged."""


def item_lock_reason(*, item: Item) -> str | None:
    """Why the item may no longer be edited or withdrawn, or None."""
    live = item.assignments.exclude(status=Assignment.Status.EXPIRED)
    judged = live.filter(status=Assignment.Status.COMPLETED).count()
    if judged:
        return f"item #{item.pk} has been judged by {judged} annotator{'s' if judged != 1 else ''}"
    if live.exists():
        return f"an annotator is judging item #{item.pk} right now"
    return None


def item_update(*, item: Item, values: dict) -> dict[str, str]:
    """Change the EDITABLE fields, checked as an upload row is; returns {field: problem}
    (nothing stored) or {} once saved."""
    record = {name: getattr(item, name) for name in FIELDS} | {
        name: values[name] for name in EDITABLE if name in values}
    errors = RowErrors()
    cleaned = row_values(item.campaign, 1, record, errors)
    if errors:
        return {problem.field: problem.reason for problem in errors}
    with transaction.atomic():
        locked = _locked_unjudged(item)
        for name in EDITABLE:
            setattr(locked, name, cleaned[name])
        locked.save(update_fields=list(EDITABLE))
    return {}


def item_withdraw(*, item: Item) -> None:
    """Take an unjudged item out of the campaign (its feedback task goes with it)."""
    with transaction.atomic():
        _locked_unjudged(item).delete()


def _locked_unjudged(item: Item) -> Item:
    """The item row locked: allocation takes the same lock before it hands the item out."""
    locked = Item.objects.select_for_update().get(pk=item.pk)
    reason = item_lock_reason(item=locked)
    if reason:
        raise ItemLocked(reason)
    return locked
