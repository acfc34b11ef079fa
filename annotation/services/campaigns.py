"""Campaign lifecycle: which status changes are allowed and what they need."""
import re

from annotation.models import Campaign, Item
from memweb.workspaces import in_workspace

MAX_CRITERIA = 10
_KEY = re.compile(r"^[a-z][a-z0-9_]{0,39}$")

# draft -> open -> closed, and a closed campaign may be reopened.
_TRANSITIONS = {
    Campaign.Status.DRAFT: {Campaign.Status.OPEN},
    Campaign.Status.OPEN: {Campaign.Status.CLOSED},
    Campaign.Status.CLOSED: {Campaign.Status.OPEN},
}


class CampaignStateError(ValueError):
    pass


def campaign_status_change(*, campaign: Campaign, status: str) -> Campaign:
    if status not in _TRANSITIONS.get(campaign.status, set()):
        raise CampaignStateError(f"a {campaign.get_status_display().lower()} campaign cannot become {status}")
    if status == Campaign.Status.OPEN and not campaign.items.exists():
        raise CampaignStateError("add items before opening the campaign")
    campaign.status_set(status)
    return campaign


def criteria_problem(criteria) -> str | None:
    """Why a criteria list is unusable, or None. Keys become form field names."""
    if not isinstance(criteria, list) or not 1 <= len(criteria) <= MAX_CRITERIA:
        return f"give between 1 and {MAX_CRITERIA} criteria"
    for criterion in criteria:
        if not isinstance(criterion, dict) or not _KEY.match(str(criterion.get("key", ""))):
            return "each criterion needs a key of lowercase letters, digits and underscores"
        if not str(criterion.get("label", "")).strip():
            return f"criterion {criterion['key']!r} needs a label"
    if len({criterion["key"] for criterion in criteria}) != len(criteria):
        return "two criteria share a key"
    return None


def campaign_has_judgments(*, campaign: Campaign) -> bool:
    """Once anyone has judged, criteria, N and ties are frozen: changing them
    would mix incomparable judgments in one result."""
    return campaign.assignments.filter(judgment__isnull=False).exists()


def items_filter(*, campaign: Campaign, language: str = "", task_format: str = "", domain: str = "",
                 stage: str = ""):
    items = campaign.items.all()
    for name, value in (("language", language), ("task_format", task_format), ("domain", domain)):
        if value:
            items = items.filter(**{name: value})
    if stage == "needs_feedback":
        items = items.filter(human_feedback="")
    elif stage == "ready":
        items = items.exclude(human_feedback="")
    return items.order_by("pk")


def item_facets(*, campaign: Campaign) -> dict[str, list[str]]:
    """The distinct values for the item filters."""
    items = campaign.items.all()
    return {name: list(items.order_by(name).values_list(name, flat=True).distinct())
            for name in ("language", "task_format", "domain")} | {"formats": list(Item.TaskFormat.values)}


def campaign_find(*, campaign_id: int) -> Campaign | None:
    """For other apps, which reach campaigns through these services, never through the model."""
    return Campaign.objects.filter(pk=campaign_id).first()


def campaigns_open_count(*, workspace) -> int:
    """For the home page's live counts."""
    return in_workspace(Campaign, workspace).filter(status=Campaign.Status.OPEN).count()
