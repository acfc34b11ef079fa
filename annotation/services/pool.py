"""Can the people available finish the campaign? Each item needs N distinct annotators, and
whoever wrote an item's human feedback may not judge it (they would know which side is theirs),
so a pool of exactly N annotators who also write feedback leaves items short forever. This says
so before it happens, and which items wait for whom."""
from collections import defaultdict
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db.models import Q

from annotation.models import Assignment, Campaign, FeedbackTask
from annotation.services.quality import excluded_ids
from annotation.services.roster import roster_ids
from memweb.roles import Role

SHOWN = 50  # short items listed by name; the count covers all of them


@dataclass(frozen=True)
class ShortItem:
    item_id: int
    judged: int
    can_judge: int
    waiting_for: tuple[str, ...]
    writer: str  # who wrote (or is writing) its feedback; "" while nobody has taken it yet
    missing: int  # judgments that nobody in the pool can give


@dataclass(frozen=True)
class Shortfall:
    needed: int
    pool: tuple[str, ...]
    items: tuple[ShortItem, ...]
    total: int

    def __bool__(self) -> bool:
        return bool(self.total)


def annotator_pool(*, campaign: Campaign) -> dict[int, str]:
    """{user id: username} of everyone who may judge here: the campaign's roster when it names
    anyone, else active annotators of the campaign's workspace and anyone who already has work in
    the campaign; excluded annotators left out."""
    members = roster_ids(campaign=campaign)
    if members:
        allowed = Q(pk__in=members)
    else:
        allowed = (Q(memberships__workspace_id=campaign.workspace_id, memberships__role=Role.ANNOTATOR)
                   | Q(annotation_assignments__campaign=campaign))
    users = (get_user_model().objects.filter(is_active=True).filter(allowed)
             .exclude(pk__in=excluded_ids(campaign=campaign)).distinct())
    return dict(users.values_list("pk", "username"))


def campaign_shortfall(*, campaign: Campaign) -> Shortfall:
    """The items that cannot reach N annotators with the pool as it is."""
    pool = annotator_pool(campaign=campaign)
    judges = defaultdict(set)
    for item_id, annotator_id in (Assignment.objects.filter(campaign=campaign).exclude(
            status=Assignment.Status.EXPIRED).values_list("item_id", "annotator_id")):
        judges[item_id].add(annotator_id)
    writers = dict(FeedbackTask.objects.filter(campaign=campaign, writer__isnull=False)
                   .values_list("item_id", "writer_id"))
    short = []
    for item_id, author_id, feedback in (campaign.items.filter(is_attention=False).order_by("pk")
                                         .values_list("pk", "human_feedback_author_id", "human_feedback")):
        writer_id = author_id or writers.get(item_id)
        found = _short_item(campaign, item_id, writer_id, not feedback and writer_id is None, judges[item_id], pool)
        if found:
            short.append(found)
    return Shortfall(needed=campaign.annotators_per_item, pool=tuple(sorted(pool.values())),
                     items=tuple(short[:SHOWN]), total=len(short))


def _short_item(campaign: Campaign, item_id: int, writer_id, unwritten: bool, judged_by: set,
                pool: dict) -> ShortItem | None:
    needed = campaign.annotators_per_item
    if len(judged_by) >= needed:
        return None
    if unwritten:
        # Not written yet: whoever writes it will be one of the pool and drop out of judging it.
        can_judge = max(len(pool) - 1, 0)
    else:
        can_judge = len(set(pool) - {writer_id})
    if can_judge >= needed:
        return None
    waiting = tuple(sorted(name for user_id, name in pool.items() if user_id not in judged_by | {writer_id}))
    return ShortItem(item_id=item_id, judged=len(judged_by), can_judge=can_judge, waiting_for=waiting,
                     writer=pool.get(writer_id, "") if writer_id else "", missing=needed - can_judge)
