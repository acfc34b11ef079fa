"""The naive-RAG layers (MemoryBench's baselines bm25_message, bm25_dialog, embedder_message and
embedder_dialog): before the agent answers, the past messages or whole past dialogues nearest to the
customer's current turn, by BM25 or by embeddings, from the bank's raw-dialogue memory
(orbs.dialogues). Nothing is reflected, reviewed or withheld: the point of the baseline is raw
experience. Each retrieval is recorded on the episode under "dialogue"."""
from evaluation.memory_layers.banked import BankedLayer, finished_rows, trial_label
from evaluation.services import episode_ref, episode_trajectory
from orbs.dialogues.services import Method, Unit, dialogue_from_trajectory, dialogues_copy, dialogues_retrieve

EXCERPT_CHARS = 600


class DialogueHook:
    def __init__(self, *, layer: "NaiveRAGLayer", config, bank):
        self.layer, self.config, self.bank = layer, config, bank
        self.block = ""
        self.retrieval_ids: list[int] = []  # no Orb retrievals whose outcome the episode's end would note

    def before_turn(self, *, turn: int, query: str, calls: list[dict] = (),
                    dialogue: list[dict] = ()) -> tuple[str, dict | None]:
        # `dialogue` is not used: MemoryBench's naive baselines query with the user's latest message alone.
        if not self.config.per_turn and turn > 1:
            return self.block, None
        result = dialogues_retrieve(bank=self.bank, query=query, method=self.layer.method, unit=self.layer.unit,
                                    k=self.config.k or self.bank.retrieval_k)
        self.block = result.prompt_block
        return self.block, {"turn": turn, "query": query, "dialogue": {
            "mode": self.layer.name, "label": self.layer.label, "unit": result.unit, "k": result.k,
            "token_budget": result.token_budget, "budget_used": result.budget_used, "prompt_block": result.prompt_block,
            "hits": [{"unit_id": h.unit_id, "dialogue_id": h.dialogue_id,
                      "dialogue_ref": h.dialogue_ref, "role": h.role, "rank": h.rank, "score": h.score,
                      "injected": h.injected, "truncated": h.truncated, "text": h.text[:EXCERPT_CHARS]}
                     for h in result.hits]}}


class NaiveRAGLayer(BankedLayer):
    """One (retrieval method, unit) pair; the four built-ins are the subclasses below."""

    method: Method
    unit: Unit
    episode_partials = ("evaluation/memory_layers/_naive_rag_episode.html",)

    def hook(self, *, config, task: dict, bank):
        return DialogueHook(layer=self, config=config, bank=bank)

    def configure(self, *, run, spec, source) -> None:
        """A run started from a bank starts from that bank's past dialogues too."""
        if source is not None:
            dialogues_copy(source=source, target=run.bank)

    def memorise(self, *, run, trial) -> None:
        """Each finished episode's dialogue into the run's raw-dialogue memory, once (keyed by the
        episode): the corpus grows at each trial's end as MemOrb's memory does. Raw dialogues are
        served unreviewed, as MemoryBench's baselines serve them, so the review gate does not apply."""
        label = trial_label(run, trial)
        for row in finished_rows(trial):
            dialogue_from_trajectory(bank=run.bank, trajectory=episode_trajectory(row.episode),
                                     dialogue_ref=episode_ref(row.episode), source_label=label)

    def export_header(self, run) -> dict:
        return super().export_header(run) | {"method": str(self.method), "unit": str(self.unit)}


class BM25Message(NaiveRAGLayer):
    name, label, method, unit = "bm25_message", "naive RAG: BM25 over past messages", Method.BM25, Unit.MESSAGE


class BM25Dialog(NaiveRAGLayer):
    name, label, method, unit = "bm25_dialog", "naive RAG: BM25 over past dialogues", Method.BM25, Unit.DIALOGUE


class EmbedderMessage(NaiveRAGLayer):
    name, label, method, unit = ("embedder_message", "naive RAG: embeddings over past messages", Method.EMBEDDER,
                                 Unit.MESSAGE)


class EmbedderDialog(NaiveRAGLayer):
    name, label, method, unit = ("embedder_dialog", "naive RAG: embeddings over past dialogues", Method.EMBEDDER,
                                 Unit.DIALOGUE)


NAIVE_RAG_LAYERS = (BM25Message, BM25Dialog, EmbedderMessage, EmbedderDialog)
NAIVE_RAG_KINDS = tuple(layer.name for layer in NAIVE_RAG_LAYERS)
