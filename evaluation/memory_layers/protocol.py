"""What a memory layer is in a run: one object that memweb asks everything it needs to know about
a kind of memory, from launch to export. Subclass MemoryLayer, set `name` and `label`, override what
the layer does; the defaults are those of a layer that remembers nothing.

A run's settings reach a layer only as its RunSpec (`spec`, or `run.run_spec`): a layer never reads
a run's settings columns.

The retrieval hook (`hook`) is the object the episode loop asks before each agent decision:
`before_turn(*, turn, query, calls, dialogue) -> (prompt block, trace record or None)` and, for a
layer that retrieves before every decision step, `before_step(*, turn, step, query, calls,
dialogue)`. The block must fit the layer's budget; the record (stored on the episode, shown in its
transcript) says what was retrieved, injected, cut and withheld. `retrieval_ids` lists the MemOrb
retrievals whose outcome the episode's end records (empty for other layers).
"""
from dataclasses import dataclass
from typing import Protocol

from evaluation.configs import MemoryConfig


class TurnHook(Protocol):
    retrieval_ids: list[int]

    def before_turn(self, *, turn: int, query: str, calls: list[dict] = (),
                    dialogue: list[dict] = ()) -> tuple[str, dict | None]: ...


@dataclass(frozen=True)
class TrialCounter:
    """A count a layer keeps on each trial (a Trial field), shown as a column of the run's trials."""

    header: str
    field: str


class MemoryLayer:
    name: str = ""
    label: str = ""
    remembers: bool = True  # False only for the no-memory baseline
    has_bank: bool = False  # the run keeps a bank of its own (fresh or copied at launch)
    reviewed: bool = False  # its memories pass the review gate before agents see them
    withholds: bool = False  # retrieved memories can be withheld at random (effect-measurement mode)
    reflects: bool = False  # writes reflections, so the reflection style and input matter
    approved_only_applies: bool = False  # the "approved only" setting filters what it serves
    learns_from_feedback: bool = False  # the run's "feedback into memory" setting applies
    uses_dmrm_params: bool = False  # takes a spec's `dmrm` section
    reaches_service: bool = False  # takes a spec's external_url and external_key (a memory service by URL)
    trial_counters: tuple[TrialCounter, ...] = ()
    # Templates rendered with `run_row` on a run episode's page: what the layer does with the episode.
    episode_partials: tuple[str, ...] = ()

    def unused_settings(self) -> frozenset[str]:
        """The RunSpec settings this layer ignores: the run page marks them, so nobody reads a review
        gate into a run whose memory is never reviewed."""
        used_when = {"memory_k": self.remembers, "per_turn": self.remembers, "same_customer_only": self.remembers,
                     "bank_source": self.has_bank, "review_gate": self.reviewed, "memory_effects": self.withholds,
                     "withhold_probability": self.withholds, "reflection_style": self.reflects,
                     "reflection_input": self.reflects, "approved_only": self.approved_only_applies,
                     "feedback_memory": self.learns_from_feedback, "dmrm": self.uses_dmrm_params,
                     "external_url": self.reaches_service, "external_key": self.reaches_service}
        return frozenset(name for name, used in used_when.items() if not used)

    # --- launch -------------------------------------------------------------------------------
    def launch_problems(self, spec) -> list[tuple[str, str]]:
        """(field, message) for each setting of `spec` this layer cannot serve; nothing is written."""
        problems = []
        if spec.dmrm is not None and not self.uses_dmrm_params:
            problems.append(("dmrm", f"DMRM parameters are only used when memory_mode is dmrm or both, not "
                                     f"{self.name}"))
        if spec.memory_effects and not self.withholds:
            problems.append(("memory_effects", f"effect measurement needs MemOrb or DMRM memory, not {self.name}"))
        if (spec.external_url or spec.external_key) and not self.reaches_service:
            problems.append(("external_url", f"a service URL and key are only used when memory_mode is external, not "
                                             f"{self.name}"))
        if spec.bank_source and not self.has_bank:
            problems.append(("bank_source", f"a bank is only used when the run has memory that keeps one "
                                            f"(memory_mode {self.name} keeps none)"))
        return problems

    def prepare(self, *, run, spec, source, copied=None) -> None:
        """At launch, inside its transaction: the run's bank and the layer's own settings."""

    # --- before each agent decision --------------------------------------------------------------
    def hook(self, *, config: MemoryConfig, task: dict, bank) -> TurnHook | None:
        """The retrieval hook of one episode, or None when the layer retrieves nothing."""
        return None

    def episode_config(self, run, *, row=None) -> MemoryConfig:
        """The MemoryConfig a run's episode retrieves with (`row`: the episode being played)."""
        return MemoryConfig(kind=self.name)

    # --- learning ------------------------------------------------------------------------------
    def episode_stored(self, *, play, episode, row) -> None:
        """Inside the transaction that stores a run's episode: what the episode teaches the memory."""

    def stores_each_episode(self, run) -> bool:
        """The trial's next episode must see this one's lessons: episodes are stored one at a time."""
        return False

    def trial_end(self, *, trial) -> None:
        """The trial's finished episodes into memory; a retried call skips what it wrote before."""

    def feedback_into_memory(self, run) -> bool:
        """On-policy feedback: the user's feedback is part of what the memory learns from."""
        return False

    # --- review, export, display --------------------------------------------------------------
    def pending_review(self, run) -> int:
        """The run's memories still waiting for a reviewer."""
        return 0

    def waits_for_review(self, run) -> bool:
        """A trial must wait until reviewers have seen the run's memories."""
        return False

    def reflects_with_answer_key(self, run) -> bool:
        return False

    def export_header(self, run) -> dict:
        """What a run's export says about its memory, beside the run's settings."""
        return {"layer": self.name, "label": self.label, "package": type(self).__module__.split(".")[0]}

    def settings_summary(self, run) -> list[str]:
        """The run page's memory settings, one short phrase each, after the label."""
        return []

    def arm_name(self, run) -> str:
        """What a run of this layer is called among other layers' (a leaderboard row): its label, and
        whatever else sets its runs apart beyond their settings (an external layer's service)."""
        return self.label

    def memory_link(self, run) -> tuple[str, str] | None:
        """(text, url) of the page showing the run's memory, or None."""
        return None
