"""An erased customer's Orbs quoted by evaluation episodes: each episode keeps, per turn, the prompt
block it was given and the first words of each hit's lesson (Episode.memories). When a customer's
Orbs are erased (orbs.services.erasure calls this through the `erasure_hooks` registry entry), the
turns that served any of them lose the block and those hits' text; the ids, ranks and scores stay,
so a run's figures are unchanged."""
from evaluation.models import Episode

ERASED = "(erased: it quoted an erased customer's memory)"


def _scrubbed(record: dict, orb_ids: set[int]) -> bool:
    hits = record.get("hits") or []
    erased = [hit for hit in hits if isinstance(hit, dict) and hit.get("orb_id") in orb_ids]
    if not erased:
        return False
    record["prompt_block"] = ERASED
    for hit in erased:
        hit["outcome"] = ""
    return True


def episode_memories_scrub(*, bank, orb_ids: list[int]) -> int:
    """Scrub the memory records of the bank's episodes that served one of `orb_ids`; how many episodes
    changed. An episode names its bank by slug or by name, as its memory configuration was given."""
    wanted, changed = set(orb_ids), 0
    episodes = Episode.objects.filter(memory_config__bank__in=[bank.slug, bank.name]).only("pk", "memories")
    for episode in episodes.iterator():
        records = [record for record in episode.memories if isinstance(record, dict)]
        if any([_scrubbed(record, wanted) for record in records]):
            Episode.objects.filter(pk=episode.pk).update(memories=episode.memories)
            changed += 1
    return changed
