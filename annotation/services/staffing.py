"""Whether a campaign's annotators can finish it: every item needs N different annotators, and
nobody judges the feedback they wrote themselves, so a pool of exactly N that wrote some of the
feedback leaves those items short for good."""
from django.contrib.auth import get_user_model

from annotation.models import Campaign
from annotation.services.quality import excluded_ids
from memweb.roles import Role


def _annotator_ids() -> set[int]:
    users = get_user_model().objects.filter(groups__name=Role.ANNOTATOR, is_active=True)
    return set(users.values_list("pk", flat=True))


def campaign_short_of_annotators(*, campaign: Campaign, annotators: set[int]) -> bool:
    pool = annotators - excluded_ids(campaign=campaign)
    need = campaign.annotators_per_item
    if len(pool) != need:
        return len(pool) < need
    return campaign.items.filter(is_attention=False, human_feedback_author_id__in=pool).exists()


def campaigns_short_count() -> int:
    """Open campaigns the annotator pool cannot complete (the home page's attention count)."""
    annotators = _annotator_ids()
    return sum(campaign_short_of_annotators(campaign=campaign, annotators=annotators)
               for campaign in Campaign.objects.filter(status=Campaign.Status.OPEN))
