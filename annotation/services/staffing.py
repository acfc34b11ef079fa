"""Whether a workspace's open campaigns can be finished by their annotators (the home page's
attention count); which items wait for whom is annotation.services.pool's campaign_shortfall."""
from annotation.models import Campaign
from annotation.services.pool import campaign_shortfall
from memweb.workspaces import in_workspace


def campaigns_short_count(*, workspace) -> int:
    """Open campaigns of `workspace` with items their annotator pool can never complete."""
    return sum(bool(campaign_shortfall(campaign=campaign))
               for campaign in in_workspace(Campaign, workspace).filter(status=Campaign.Status.OPEN))
