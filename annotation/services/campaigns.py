"""Campaign lifecycle: which status changes are allowed and what they need."""
import re

from annotation.models import Campaign, Item

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


def item_facets(*, campaign: Campaign) -> dict[str, list[str]]:
    """The distinct values for the item filters."""
    items = campaign.items.all()
    return {name: list(items.order_by(name).values_list(name, flat=True).distinct())
            for name in ("language", "task_format", "domain")} | {"formats": list(Item.TaskFormat.values)}


def campaign_find(*, campaign_id: int, workspace) -> Campaign | None:
    """For other apps, which reach campaigns through these services, never through the model: the
    campaign if `workspace` holds it."""
    return Campaign.objects.of(workspace).filter(pk=campaign_id).first()


def campaigns_open_count(*, workspace) -> int:
    """For the home page's live counts."""
    return Campaign.objects.of(workspace).filter(status=Campaign.Status.OPEN).count()


def campaigns_addable(*, workspace):
    """The workspace's campaigns that take new items (draft or open), for other apps' pickers."""
    return Campaign.objects.of(workspace).exclude(status=Campaign.Status.CLOSED).order_by("name")


def campaign_create_named(*, name: str, user, workspace) -> Campaign:
    """A draft campaign of `workspace` with the study's default settings, for other apps' "new
    campaign" choice."""
    name = name.strip()
    max_length = Campaign._meta.get_field("name").max_length
    if not name or len(name) > max_length:
        raise CampaignStateError(f"give the new campaign a name of 1 to {max_length} characters")
    if Campaign.all_workspaces.filter(name=name).exists():
        raise CampaignStateError(f"a campaign named “{name}” exists already; choose it from the list")
    return Campaign.objects.create(name=name, workspace=workspace,
                                   created_by=user if getattr(user, "is_authenticated", False) else None)
