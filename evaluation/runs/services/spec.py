"""The one definition of a run's settings: what the API takes as its body, what the launch form
offers (its fields, defaults and bounds are read from here) and what a run row keeps."""
import pydantic
from django.db import models

from evaluation.configs import AgentConfig, CustomerConfig, MemoryKind, ReflectionInput
from evaluation.feedback.services import MAX_FEEDBACK_ROUNDS
from evaluation.runs.models import FeedbackMemory, ReviewGate, RunPreset
from memweb.errors import problems_of
from memweb.schemas import StrictBody
from orbs.dmrm.services import StateMatch, Suppression
from orbs.services import ReflectionStyle

MAX_TRIALS = 100
MAX_CONCURRENCY = 32
MAX_TURNS = 50
# A fifth of the retrievals withheld gives each memory a comparison group at a small cost in
# memory served; above a half, the run mostly measures itself without memory.
DEFAULT_WITHHOLD_PROBABILITY = 0.2
MAX_WITHHOLD_PROBABILITY = 0.5


class DMRMWriteTiming(models.TextChoices):
    EPISODE = "episode", "as each episode is stored"
    TRIAL_END = "trial_end", "when the trial ends"


class DMRMParams(StrictBody):
    """DMRM's parameters: all but `write_timing` (a run's choice) are set on the run's bank (the DMRM
    settings page documents each)."""

    alpha: float = pydantic.Field(default=0.5, ge=0.0, le=1.0, description="Learning rate α of the Q update")
    gamma: float = pydantic.Field(default=0.9, ge=0.0, le=1.0, description="Discount γ")
    c_max: int = pydantic.Field(default=512, ge=16, le=8000, description="Token budget C_max")
    n_success: int = pydantic.Field(default=2, ge=1, le=100,
                                    description="Successful trajectories before the source memory is suppressed")
    suppression_mode: Suppression = pydantic.Field(
        default=Suppression.DISABLE, description="What happens to the source memory after n successes")
    source_weight: float = pydantic.Field(default=0.5, ge=0.0, le=1.0, description="Down-weight factor")
    min_similarity: float = pydantic.Field(
        default=0.3, ge=-1.0, le=1.0, description="Entries less similar than this to (o, g) are never in the prompt")
    state_match: StateMatch = pydantic.Field(
        default=StateMatch.EXACT, description="How the Q update finds the successor state: exact text or similarity")
    state_similarity: float = pydantic.Field(
        default=0.9, ge=0.0, le=1.0, description="Similar state match: the cosine at which states count as one")
    write_timing: DMRMWriteTiming = pydantic.Field(
        default=DMRMWriteTiming.EPISODE,
        description="When an episode's steps enter the target memory: as it is stored (the paper) or at trial end")


PRESETS = {
    RunPreset.MEMORB_K1: {"memory_mode": MemoryKind.MEMORB, "memory_k": 1},
    RunPreset.MEMORB_STRUCTURED: {"memory_mode": MemoryKind.MEMORB, "reflection_style": ReflectionStyle.STRUCTURED},
}
# The paper's No-Memory baseline: an LLM agent with a 4k-token context window.
NO_MEMORY_CONTEXT_TOKENS = 4096


class RunSpec(StrictBody):
    """Everything a launch needs; the API takes it as its body, the launch form builds it."""

    name: str = pydantic.Field(min_length=1, max_length=200)
    task_set: str = pydantic.Field(default="", max_length=100, description="Task set name; the built-in set when empty")
    domain: str = ""
    split: str = ""
    task_ids: list[str] = pydantic.Field(default_factory=list, description="External task ids; empty = all selected")
    agent: AgentConfig = pydantic.Field(default_factory=AgentConfig)
    customer: CustomerConfig = pydantic.Field(default_factory=CustomerConfig)
    memory_mode: MemoryKind = MemoryKind.NONE
    memory_k: int = pydantic.Field(default=5, ge=1, le=50, description="Memories retrieved per query")
    dmrm: DMRMParams | None = pydantic.Field(
        default=None, description="DMRM runs: the bank's parameters; empty keeps the copied bank's (or the defaults)")
    approved_only: bool = True
    same_customer_only: bool = pydantic.Field(
        default=False, description="Only Orbs from the customer's own earlier episodes: a same-customer filter, not the "
                                   "paper's no-cross-user ablation (that is the memorb_k1 preset)")
    reflection_style: ReflectionStyle = pydantic.Field(
        default=ReflectionStyle.SIMPLE, description="How trial-end reflections are written; structured is the paper's "
                                                    "complex-reflection ablation")
    reflection_input: ReflectionInput = pydantic.Field(
        default=ReflectionInput.TRAJECTORY,
        description="What reflections (and feedback into memory) are written from: the trajectory, or oracle (a "
                    "diagnosis against the task's gold answer too, which leaks the answer key into memory)")
    preset: RunPreset | None = pydantic.Field(
        default=None, description="One of the paper's ablations; sets " + "; ".join(
            f"{name}: {', '.join(f'{k}={v}' for k, v in fields.items())}" for name, fields in PRESETS.items()))
    per_turn: bool = True
    withhold_probability: float = pydantic.Field(
        default=DEFAULT_WITHHOLD_PROBABILITY, ge=0.0, le=MAX_WITHHOLD_PROBABILITY,
        description="Chance that a retrieved Orb is kept out of an episode's prompt, decided once per (episode, Orb) "
                    "from the seed: measures each memory's effect; ignored without memory")
    bank_source: str = pydantic.Field(default="", max_length=200, description="Bank to copy; a fresh bank when empty")
    trials: int = pydantic.Field(default=10, ge=1, le=MAX_TRIALS)
    pass_k: int | None = pydantic.Field(default=None, ge=1, description="Largest k of Pass^k to report")
    seed: int = pydantic.Field(default=0, ge=0, le=2**31 - 1)
    max_turns: int = pydantic.Field(default=12, ge=1, le=MAX_TURNS)
    concurrency: int = pydantic.Field(default=4, ge=1, le=MAX_CONCURRENCY)
    review_gate: ReviewGate = ReviewGate.AUTO
    feedback_enabled: bool = False
    feedback_memory: FeedbackMemory = pydantic.Field(
        default=FeedbackMemory.ONPOLICY,
        description="Feedback runs with MemOrb memory: onpolicy writes each trial's Orbs with its users' feedback "
                    "(MemoryBench), none writes them from the plain trajectories")
    feedback_rounds: int = pydantic.Field(
        default=1, ge=1, le=MAX_FEEDBACK_ROUNDS,
        description="Feedback runs: turns of feedback per episode; after each but the last, the agent answers "
                    "the critique and the user judges the answer (MemoryBench allows up to 3)")

    @pydantic.model_validator(mode="after")
    def _preset_fills_its_fields(self):
        """The preset's values for the fields not given; a given one that differs is refused at launch."""
        for name, value in PRESETS.get(self.preset, {}).items():
            if name not in self.model_fields_set:
                setattr(self, name, value)
        return self

    def preset_conflicts(self) -> list[tuple[str, str]]:
        return [(name, f"the preset {self.preset} sets {name} to {value}, got {getattr(self, name)}")
                for name, value in PRESETS.get(self.preset, {}).items() if getattr(self, name) != value]


class RunLaunchError(ValueError):
    """Launch refused; `problems` lists (field, message) pairs, nothing was written."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{field}: {message}" for field, message in problems))


_BOUND_WORDS = {"greater_than_equal": ("at least", "ge"), "less_than_equal": ("at most", "le")}


def _bound_message(error: dict) -> str:
    bound = _BOUND_WORDS.get(error["type"])
    if bound:
        return f"must be {bound[0]} {error['ctx'][bound[1]]}, got {error['input']!r}"
    return error["msg"]


def run_spec_parse(data: dict | RunSpec) -> RunSpec:
    if isinstance(data, RunSpec):
        return data
    try:
        return RunSpec.model_validate(data)
    except pydantic.ValidationError as exc:
        raise RunLaunchError(problems_of(exc, whole="(body)", message=_bound_message)) from None
