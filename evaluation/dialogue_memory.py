"""The hook of the naive-RAG memory kinds (MemoryBench's baselines): before the agent answers, the
past messages or whole past dialogues nearest to the customer's current turn, by BM25 or by
embeddings, from the bank's raw-dialogue memory (orbs.dialogues). Nothing is reflected, reviewed
or withheld: the point of the baseline is raw experience. Each retrieval is recorded on the
episode under "dialogue", so the transcript shows what the agent saw.
"""
from evaluation.configs import MemoryConfig, MemoryKind
from orbs.dialogues.services import Method, Unit, dialogues_retrieve

# Each kind is one (retrieval method, unit) pair of MemoryBench's bm25_message, bm25_dialog,
# embedder_message and embedder_dialog.
NAIVE_RAG_METHODS = {
    MemoryKind.BM25_MESSAGE: (Method.BM25, Unit.MESSAGE),
    MemoryKind.BM25_DIALOG: (Method.BM25, Unit.DIALOGUE),
    MemoryKind.EMBEDDER_MESSAGE: (Method.EMBEDDER, Unit.MESSAGE),
    MemoryKind.EMBEDDER_DIALOG: (Method.EMBEDDER, Unit.DIALOGUE),
}
EXCERPT_CHARS = 600


class DialogueHook:
    """The memory hook interface of evaluation.memory: before_turn(*, turn, query, calls)."""

    def __init__(self, *, config: MemoryConfig, task: dict, bank):
        self.config, self.bank = config, bank
        self.method, self.unit = NAIVE_RAG_METHODS[config.kind]
        self.block = ""
        self.retrieval_ids: list[int] = []  # no Orb retrievals whose outcome the episode's end would note

    def before_turn(self, *, turn: int, query: str, calls: list[dict] = (),
                    dialogue: list[dict] = ()) -> tuple[str, dict | None]:
        # `dialogue` is not used: MemoryBench's naive baselines query with the user's latest message alone.
        if not self.config.per_turn and turn > 1:
            return self.block, None
        result = dialogues_retrieve(bank=self.bank, query=query, method=self.method, unit=self.unit,
                                    k=self.config.k or self.bank.retrieval_k)
        self.block = result.prompt_block
        return self.block, {"turn": turn, "query": query, "dialogue": {
            "mode": self.config.kind.value, "label": self.config.kind.label, "unit": result.unit, "k": result.k,
            "token_budget": result.token_budget, "budget_used": result.budget_used, "prompt_block": result.prompt_block,
            "hits": [{"unit_id": h.unit_id, "dialogue_id": h.dialogue_id,
                      "dialogue_ref": h.dialogue_ref, "role": h.role, "rank": h.rank, "score": h.score,
                      "injected": h.injected, "truncated": h.truncated, "text": h.text[:EXCERPT_CHARS]}
                     for h in result.hits]}}


DIALOGUE_HOOKS = {kind: [DialogueHook] for kind in NAIVE_RAG_METHODS}
