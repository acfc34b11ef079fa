"""MemOrb: before each customer turn, the bank's reviewed policy reflections (Orbs) nearest to the
rewritten query (orbs.services.orbs_retrieve: rewrite -> embed -> top-k); at each trial's end, the
trial's trajectories reflected into Orbs, with the users' feedback folded in when the run feeds
feedback into memory (MemoryBench's on-policy feedback). Its presets are in runs.services.spec."""
from django.utils.html import format_html

from evaluation.configs import ReflectionInput
from evaluation.feedback.services import feedback_of, feedback_trajectory
from evaluation.memory_layers.banked import (
    BankedLayer,
    finished_rows,
    harm_look,
    memory_withheld,
    trial_label,
)
from evaluation.memory_layers.protocol import TrialCounter
from evaluation.models import Episode
from evaluation.runs.models import FeedbackMemory, ReviewGate, RunEpisode, Trial
from evaluation.services import bank_harmful_flag, episode_ref, episode_trajectory
from orbs.services import (
    EpisodeToRemember,
    dialogue_window,
    orbs_from_episodes,
    orbs_pending_approve,
    orbs_pending_count,
    orbs_retrieve,
    retrieval_outcome_record,
)

_OUTCOME_CHARS = 400


class RetrievingHook:
    """Retrieves before the turn's first decision (or only before the first turn, without per_turn)."""

    def __init__(self, *, config, task: dict, bank):
        self.config, self.task, self.bank = config, task, bank
        self.block = ""
        self.retrieval_ids: list[int] = []  # MemOrb retrievals, whose outcome is noted when the episode ends
        self.dialogue: list[dict] = []

    def before_turn(self, *, turn: int, query: str, calls: list[dict] = (),
                    dialogue: list[dict] = ()) -> tuple[str, dict | None]:
        if not self.config.per_turn and turn > 1:
            return self.block, None
        self.dialogue = list(dialogue)
        self.block, record = self.retrieve(turn=turn, query=query, calls=list(calls))
        return self.block, {"turn": turn, "query": query, **record}


class MemOrbHook(RetrievingHook):
    def retrieve(self, *, turn: int, query: str, calls: list[dict]) -> tuple[str, dict]:
        result = orbs_retrieve(
            bank=self.bank, query=query, k=self.config.k, approved_only=self.config.approved_only,
            context={"task_id": self.task["id"], "domain": self.task["domain"], "turn": turn,
                     "history": dialogue_window(self.dialogue)},
            domain=self.task["domain"] if self.config.same_domain_only else None,
            customer_key=self.task["customer_id"] if self.config.same_customer_only else None,
            min_score=self.config.min_score, client="evaluation", withhold=self._withheld)
        self.retrieval_ids.append(result.retrieval_id)
        return result.prompt_block, {
            "retrieval_id": result.retrieval_id, "rewritten_query": result.rewritten_query,
            "rewriter_backend": result.rewriter_backend, "timings": result.timings,
            "prompt_block": result.prompt_block, "retrieved": len(result.hits), "injected": result.injected_count,
            # served = in the prompt: an Orb cut by the token budget was neither served nor withheld
            "served_ids": [hit.orb.pk for hit in result.hits if hit.injected],
            "withheld_ids": [hit.orb.pk for hit in result.hits if hit.withheld],
            "hits": [{"orb_id": hit.orb.pk, "rank": hit.rank, "score": hit.score, "emotion": hit.orb.emotion,
                      "withheld": hit.withheld, "injected": hit.injected,
                      "outcome": hit.orb.outcome[:_OUTCOME_CHARS]} for hit in result.hits]}

    def _withheld(self, orb_id: int) -> bool:
        return memory_withheld(key=self.config.withhold_key, memory_id=orb_id,
                               probability=self.config.withhold_probability)


def run_orb_ids(run):
    return run.run_episodes.filter(orb__isnull=False).values("orb_id")


class MemOrbLayer(BankedLayer):
    name, label = "memorb", "MemOrb"
    reviewed = withholds = reflects = approved_only_applies = learns_from_feedback = True
    trial_counters = (TrialCounter("Orbs written", "orbs_written"),)
    episode_partials = ("evaluation/memory_layers/_memorb_episode.html",)

    def hook(self, *, config, task: dict, bank):
        return MemOrbHook(config=config, task=task, bank=bank)

    def learn_episode(self, *, play, episode, run) -> None:
        """How the episode's retrievals ended, inside the transaction that stores it (a dropped copy
        records nothing): the only writer of those outcomes for run episodes."""
        retrieval_outcome_record(retrieval_ids=play.retrieval_ids, success=episode.success, reward=episode.reward,
                                 episode_ref=episode_ref(episode))

    def memorise(self, *, run, trial) -> None:
        orbs_write(run, trial)
        if run.run_spec.withhold_probability:
            bank_harmful_flag(bank=run.bank, look=harm_look(run, trial))  # an Orb may have shown it does harm

    def feedback_into_memory(self, run) -> bool:
        spec = run.run_spec
        return spec.feedback_enabled and spec.feedback_memory == FeedbackMemory.ONPOLICY

    def pending_review(self, run) -> int:
        return orbs_pending_count(orb_ids=run_orb_ids(run))

    def waits_for_review(self, run) -> bool:
        return run.run_spec.review_gate == ReviewGate.WAIT

    def reflects_with_answer_key(self, run) -> bool:
        return run.run_spec.reflection_input == ReflectionInput.ORACLE

    def export_header(self, run) -> dict:
        spec = run.run_spec
        return super().export_header(run) | {"reflection_style": str(spec.reflection_style),
                                             "reflection_input": str(spec.reflection_input)}

    def own_settings_summary(self, run) -> list[str]:
        answer_key = format_html('<strong id="run-oracle-reflection">{}</strong>',
                                 "oracle reflection (saw the gold answer)")
        return [f"{run.run_spec.reflection_style} reflection",
                answer_key if self.reflects_with_answer_key(run) else "reflected from the trajectory"]


def orbs_write(run, trial: Trial) -> None:
    spec = run.run_spec
    rows = list(finished_rows(trial).filter(orb__isnull=True))
    # One batch for the trial: the same Orbs as writing each episode in turn, at a fraction of the cost.
    results = orbs_from_episodes(bank=run.bank, source_label=trial_label(run, trial),
                                 reflection_style=spec.reflection_style, episodes=[
                                     EpisodeToRemember(_orb_trajectory(run, row.episode), episode_ref(row.episode))
                                     for row in rows])
    for row, result in zip(rows, results):
        row.orb = result.orb
    RunEpisode.objects.bulk_update(rows, ["orb"])
    Trial.objects.filter(pk=trial.pk).update(orbs_written=trial.run_episodes.filter(orb__isnull=False).count())
    if spec.review_gate == ReviewGate.AUTO:
        orbs_pending_approve(orb_ids=run_orb_ids(run),
                             note=f"auto-approved by {run.orb_label} (review gate: auto-approve in-run memories)")


def _orb_trajectory(run, episode: Episode) -> dict:
    """On-policy feedback (MemoryBench): the Orb is reflected from the trajectory with the user's
    feedback folded in, so the next trial plays against memory that learnt from it. Judging ran
    before the trial's end (trial_finish backfills what a dead worker missed), so a missing row is
    an error the run shows, never a silent plain Orb."""
    reflection_input = run.run_spec.reflection_input
    if not run.memory_layer.feedback_into_memory(run):
        return episode_trajectory(episode, reflection_input=reflection_input)
    feedback = feedback_of([episode]).first()
    if feedback is None:
        raise ValueError(f"episode {episode.pk} has no simulated feedback to write into memory")
    return feedback_trajectory(feedback=feedback, reflection_input=reflection_input)
