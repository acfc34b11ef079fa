"""The memory hook: what an agent is reminded of before it answers a customer turn.

MemOrb retrieval goes through orbs.services.orbs_retrieve (rewrite -> embed -> top-k); each
retrieval is recorded on the episode with its hits, so the transcript shows what the agent saw.
"""
from evaluation.configs import MemoryConfig
from orbs.services import bank_resolve, orbs_retrieve

_OUTCOME_CHARS = 400


class MemOrbHook:
    def __init__(self, *, config: MemoryConfig, task: dict):
        self.config, self.task = config, task
        self.bank = bank_resolve(config.bank)
        self.block = ""
        self.retrieval_ids: list[int] = []

    def before_turn(self, *, turn: int, query: str) -> tuple[str, dict | None]:
        """(prompt block for this turn, record of the retrieval or None when none was made)."""
        if not self.config.per_turn and turn > 1:
            return self.block, None
        result = orbs_retrieve(
            bank=self.bank, query=query, k=self.config.k, approved_only=self.config.approved_only,
            context={"task_id": self.task["id"], "domain": self.task["domain"], "turn": turn},
            domain=self.task["domain"] if self.config.same_domain_only else None,
            customer_key=self.task["customer_id"] if self.config.same_customer_only else None,
            min_score=self.config.min_score, client="evaluation")
        self.block = result.prompt_block
        self.retrieval_ids.append(result.retrieval_id)
        return self.block, _record(turn, query, result)


def _record(turn: int, query: str, result) -> dict:
    return {
        "turn": turn, "query": query, "retrieval_id": result.retrieval_id,
        "rewritten_query": result.rewritten_query, "prompt_block": result.prompt_block,
        "hits": [{"orb_id": hit.orb.pk, "rank": hit.rank, "score": hit.score, "emotion": hit.orb.emotion,
                  "outcome": hit.orb.outcome[:_OUTCOME_CHARS]} for hit in result.hits],
    }
