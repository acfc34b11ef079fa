"""Where an Orb came from and what it did: its revisions' source episodes, every retrieval that
returned it (query, rank, score, whether it reached the prompt) and how each of those episodes ended."""
from orbs.models import Orb, RetrievalHit
from orbs.services.identity import orb_revisions

PROMPT_STATES = {"injected": "injected", "cut": "cut by the token budget", "withheld": "withheld at random",
                 "unrecorded": "not recorded (retrieved before this was kept)"}


def _prompt_state(hit: RetrievalHit) -> str:
    if hit.withheld:
        return "withheld"
    return {True: "injected", False: "cut", None: "unrecorded"}[hit.injected]


def orb_provenance(*, orb: Orb) -> dict:
    """The revision chain with each revision's source, and every retrieval of any revision (newest
    first) with its prompt state and its episode's outcome, plus the counts of each."""
    chain = orb_revisions(orb=orb)
    hits = list(RetrievalHit.objects.filter(orb__in=chain).select_related("retrieval", "orb")
                .order_by("-retrieval__created_at", "-retrieval_id", "rank"))
    states = [_prompt_state(hit) for hit in hits]
    retrievals = [{"hit": hit, "retrieval": hit.retrieval, "state": PROMPT_STATES[state]}
                  for hit, state in zip(hits, states)]
    known = [hit.retrieval.outcome_success for hit in hits if hit.retrieval.outcome_success is not None]
    return {"orb": orb, "sources": [{"orb": revision, "episode": revision.episode} for revision in chain],
            "retrievals": retrievals,
            "counts": {"retrievals": len(hits), **{state: states.count(state) for state in PROMPT_STATES},
                       "outcomes": len(known), "successes": sum(known)}}
