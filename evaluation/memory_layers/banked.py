"""What every built-in layer with memory shares: the run's own bank, the episode's retrieval
settings from the run's spec, and the episodes a trial's end learns from."""
import hashlib

from django.urls import reverse

from evaluation.configs import MemoryConfig
from evaluation.memory_layers.protocol import MemoryLayer
from evaluation.runs.models import RunEpisode, Trial
from evaluation.runs.services.memory import run_bank
from evaluation.runs.services.splits import learning_rows, learns_from
from evaluation.services import EpisodeConfigError, episode_ref
from evaluation.services.memory_effects import HarmLook


def memory_withheld(*, key: str, memory_id: int | str, probability: float) -> bool:
    """Randomised withholding: a retrieved memory is kept out of the prompt with `probability`. The
    same (key, memory) always draws the same, in every process and on every turn: a hash, not a
    random generator whose state depends on what was drawn before."""
    if probability <= 0:
        return False
    digest = hashlib.sha256(f"{key}:{memory_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < probability


def episode_withhold_key(row: RunEpisode) -> str:
    """The run's seed and the episode: a replayed episode withholds what it withheld before. The
    row's seed is the run's seed and the trial (protocol.episode_seed)."""
    return f"run-seed:{row.seed}:task:{row.task_key}"


class BankedLayer(MemoryLayer):
    """A layer whose run keeps a bank of its own: fresh, or a copy of the source bank."""

    has_bank = True

    def prepare(self, *, run, spec, source, copied=None) -> None:
        run.bank = run_bank(run, source, copied)
        self.configure(run=run, spec=spec, source=source)
        run.save(update_fields=["bank", "dmrm_config"])

    def configure(self, *, run, spec, source) -> None:
        """The layer's own settings on the run's new bank."""

    def episode_config(self, run, *, row=None) -> MemoryConfig:
        spec = run.run_spec
        return MemoryConfig(kind=self.name, bank=run.bank.slug if run.bank else "", k=spec.memory_k,
                            approved_only=spec.approved_only, same_customer_only=spec.same_customer_only,
                            per_turn=spec.per_turn, withhold_probability=spec.withhold_probability,
                            withhold_key=episode_withhold_key(row) if row else "")

    def episode_stored(self, *, play, episode, row) -> None:
        """Nothing for a held-out (test) episode, whose memory stays as the train split left it."""
        if learns_from(row):
            self.learn_episode(play=play, episode=episode, run=row.run)

    def learn_episode(self, *, play, episode, run) -> None:
        """What a stored episode the run learns from teaches the memory."""

    def trial_end(self, *, trial) -> None:
        if trial.run.bank is None:
            raise EpisodeConfigError("the run's memory bank no longer exists")
        self.memorise(run=trial.run, trial=trial)

    def memorise(self, *, run, trial) -> None:
        """The trial's finished episodes into the run's bank."""

    def settings_summary(self, run) -> list[str]:
        spec = run.run_spec
        lines = [f"k={spec.memory_k}"]
        lines += ["approved only"] if spec.approved_only and self.approved_only_applies else []
        lines += ["same-customer filter"] if spec.same_customer_only else []
        lines += self.own_settings_summary(run)
        lines += [] if spec.per_turn else ["once per episode"]
        return lines

    def own_settings_summary(self, run) -> list[str]:
        return []

    def memory_link(self, run) -> tuple[str, str] | None:
        if run.bank is None:
            return None
        return "its memories", reverse("orbs:bank_detail", args=[run.bank.slug])


def finished_rows(trial: Trial):
    """The trial's episodes memory learns from: finished, and never a held-out run's test episodes."""
    rows = trial.run_episodes.filter(status=RunEpisode.Status.DONE, episode__isnull=False)
    return learning_rows(rows).select_related("episode").order_by("task_key")


def harm_look(run, trial: Trial) -> HarmLook:
    """The harm flag looks at this run's episodes so far, once per trial end, with its error rate spread
    over the run's planned trials (evaluation.metrics.harmful_memories)."""
    rows = run.run_episodes.filter(episode__isnull=False).select_related("episode").only("id", "episode__id")
    return HarmLook(number=trial.number, planned=run.run_spec.trials, label=run.orb_label,
                    episode_refs=frozenset(episode_ref(row.episode) for row in rows))


def trial_label(run, trial: Trial) -> str:
    return f"{run.orb_label} · trial {trial.number}"
