"""An example memweb memory layer, installed as a package of its own (docs/MEMORY_LAYERS.md).

Before the first customer turn the agent is told how this run's earlier attempts at the same task
went; what it learns from is the episodes the run stores, so it writes nothing of its own.
"""
from evaluation.memory_layers.banked import BankedLayer
from evaluation.models import Episode

ATTEMPTS_SHOWN = 3


class LastOutcomeHook:
    def __init__(self, *, config, task: dict, bank):
        self.config, self.task, self.bank = config, task, bank
        self.block = ""
        self.retrieval_ids: list[int] = []  # no MemOrb retrievals to close when the episode ends

    def before_turn(self, *, turn: int, query: str, calls=(), dialogue=()) -> tuple[str, dict | None]:
        if turn > 1:
            return self.block, None
        earlier = list(Episode.objects.filter(memory_config__bank=self.bank.slug, task__external_id=self.task["id"])
                       .order_by("-created_at").values("pk", "success", "ended_by", "errors"))
        shown = earlier[: self.config.k or ATTEMPTS_SHOWN]
        self.block = _block(shown)
        return self.block, {"turn": turn, "query": query, "last_outcome": {
            "retrieved": len(earlier), "injected": len(shown), "cut": len(earlier) - len(shown), "withheld": 0,
            "episode_ids": [attempt["pk"] for attempt in shown], "prompt_block": self.block}}


def _block(attempts: list[dict]) -> str:
    if not attempts:
        return ""
    lines = [f"- {'succeeded' if a['success'] else 'failed'} (ended by {a['ended_by']})"
             + (f"; mistakes: {', '.join(e['kind'] for e in a['errors'])}" if a["errors"] else "") for a in attempts]
    return "Your earlier attempts at this task, latest first:\n" + "\n".join(lines)


class LastOutcomeLayer(BankedLayer):
    """A bank of its own only keys the run's episodes: nothing is written into it."""

    name, label = "last_outcome", "Example: earlier outcomes on the task"

    def hook(self, *, config, task: dict, bank):
        return LastOutcomeHook(config=config, task=task, bank=bank)

    def own_settings_summary(self, run) -> list[str]:
        return ["shows the run's earlier attempts at the task"]

    def export_header(self, run) -> dict:
        return super().export_header(run) | {"version": "0.1.0"}
