"""Whether a workspace's open campaigns can be finished by their annotators (the home page's
attention count); which items wait for whom is annotation.services.pool's campaign_shortfall."""
from annotation.models import Campaign
from annotation.services.pool import annotator_pool, campaign_shortfall


def campaign_short_of_annotators(*, campaign: Campaign) -> bool:
    """Fewer annotators than each item needs, or items that writer exclusion leaves short for good."""
    return len(annotator_pool(campaign=campaign)) < campaign.annotators_per_item or bool(
        campaign_shortfall(campaign=campaign))


def campaigns_short_count(*, workspace) -> int:
    """Open campaigns of `workspace` that their annotator pool can never complete."""
    return sum(campaign_short_of_annotators(campaign=campaign)
               for campaign in Campaign.objects.of(workspace).filter(status=Campaign.Status.OPEN))
