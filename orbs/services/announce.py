"""What the Orbs app tells webhooks (memweb.webhooks): an episode ingested, an Orb awaiting review.
Each payload names ids a receiver can fetch through the API, and carries what a notification shows."""
from memweb.webhooks import webhooks_emit
from orbs.models import EpisodeRecord, Orb
from orbs.vocabulary import OrbsEvent


def episode_ingested_announce(episode: EpisodeRecord, orb: Orb, *, created: bool) -> None:
    """The episode's reflection is stored: a new Orb (`orb_created`), or an Orb the bank already held."""
    webhooks_emit(OrbsEvent.EPISODE_INGESTED, {
        "episode_id": episode.pk, "bank": episode.bank.slug, "source": episode.source,
        "source_label": episode.source_label, "episode_ref": episode.episode_ref,
        "success": episode.success, "reward": episode.reward,
        "orb_id": orb.pk, "orb_created": created, "orb_status": orb.status,
    }, bank=episode.bank.slug, workspace_id=episode.bank.workspace_id)


def orb_created_announce(orb: Orb) -> None:
    """A new Orb that waits for a reviewer (auto-approved ones are not announced)."""
    if orb.status != Orb.Status.PENDING:
        return
    webhooks_emit(OrbsEvent.ORB_PENDING_REVIEW, {
        "orb_id": orb.pk, "bank": orb.bank.slug, "outcome": orb.outcome, "emotion": orb.emotion,
        "customer_key": orb.customer_key, "domain": orb.domain, "source": orb.source,
        "episode_id": orb.episode_id, "episode_ref": orb.episode_ref,
        "near_duplicate_of": orb.near_duplicate_of_id,
    }, bank=orb.bank.slug, workspace_id=orb.bank.workspace_id)
