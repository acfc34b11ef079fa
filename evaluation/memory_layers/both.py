"""MemOrb and DMRM together: both prompt blocks before each decision, both memories learning."""
from evaluation.memory_layers.dmrm import DMRMHook, DMRMLayer
from evaluation.memory_layers.memorb import MemOrbHook, MemOrbLayer


class CombinedHook:
    """One record per turn holding both layers' records."""

    def __init__(self, hooks: list):
        self.hooks = hooks

    @property
    def retrieval_ids(self) -> list[int]:
        return [pk for hook in self.hooks for pk in hook.retrieval_ids]

    def before_turn(self, *, turn: int, query: str, calls: list[dict] = (),
                    dialogue: list[dict] = ()) -> tuple[str, dict | None]:
        answers = [hook.before_turn(turn=turn, query=query, calls=calls, dialogue=dialogue) for hook in self.hooks]
        return self._joined(answers)

    def before_step(self, *, turn: int, step: int, query: str, calls: list[dict] = (),
                    dialogue: list[dict] = ()) -> tuple[str, dict | None]:
        """The per-step hooks retrieve again; the others keep the block of the turn."""
        answers = [hook.before_step(turn=turn, step=step, query=query, calls=calls, dialogue=dialogue)
                   if hasattr(hook, "before_step") else (hook.block, None) for hook in self.hooks]
        return self._joined(answers)

    @staticmethod
    def _joined(answers: list[tuple[str, dict | None]]) -> tuple[str, dict | None]:
        block = "\n\n".join(b for b, _ in answers if b)
        records = [r for _, r in answers if r is not None]
        return block, ({k: v for r in records for k, v in r.items()} if records else None)


class BothLayer(MemOrbLayer):
    """MemOrb's reflections, review and feedback, with DMRM's experiences, settings and step writes."""

    name, label = "both", "MemOrb + DMRM"
    uses_dmrm_params = True
    trial_counters = MemOrbLayer.trial_counters + DMRMLayer.trial_counters
    episode_partials = MemOrbLayer.episode_partials + DMRMLayer.episode_partials
    dmrm = DMRMLayer()

    def hook(self, *, config, task: dict, bank):
        return CombinedHook([MemOrbHook(config=config, task=task, bank=bank),
                             DMRMHook(config=config, task=task, bank=bank)])

    def configure(self, *, run, spec, source) -> None:
        self.dmrm.configure(run=run, spec=spec, source=source)

    def learn_episode(self, *, play, episode, run) -> None:
        super().learn_episode(play=play, episode=episode, run=run)
        self.dmrm.learn_episode(play=play, episode=episode, run=run)

    def stores_each_episode(self, run) -> bool:
        return self.dmrm.stores_each_episode(run)

    def memorise(self, *, run, trial) -> None:
        super().memorise(run=run, trial=trial)
        self.dmrm.memorise(run=run, trial=trial)

    def export_header(self, run) -> dict:
        return super().export_header(run) | {"dmrm": run.dmrm_config}
