"""The one definition of a run's settings: what the API takes as its body, what the launch form
offers (its fields, defaults and bounds are read from here) and what a run row keeps."""
import pydantic
from django.db import models

from evaluation.configs import AgentConfig, CustomerConfig, MemoryKind, ReflectionInput
from evaluation.feedback.services import MAX_FEEDBACK_ROUNDS
from evaluation.memory_layers.registry import NO_MEMORY, memory_layer_validate, memory_layers
from evaluation.runs.models import EvaluationMode, FeedbackCalibration, FeedbackMemory, ReviewGate, RunPreset, SplitRule
from memweb.errors import problems_of
from memweb.schemas import StrictBody
from orbs.dmrm.services import StateMatch, Suppression
from orbs.services import ReflectionStyle

MAX_TRIALS = 100
MAX_CONCURRENCY = 32
MAX_TURNS = 50
# Withholding serves an arm fewer memories than its plain counterpart, so it is off unless a run
# is launched to measure each memory's effect (memory_effects).
DEFAULT_WITHHOLD_PROBABILITY = 0.0
# Effect measurement: a fifth of the retrievals withheld gives each memory a comparison group at a
# small cost in memory served; above a half, the run mostly measures itself without memory.
EFFECT_WITHHOLD_PROBABILITY = 0.2
MAX_WITHHOLD_PROBABILITY = 0.5


class DMRMWriteTiming(models.TextChoices):
    EPISODE = "episode", "as each episode is stored"
    TRIAL_END = "trial_end", "when the trial ends"


class CMaxRule(models.TextChoices):
    """Where C_max comes from when the spec gives no number."""

    AGENT_WINDOW = "agent_window", "the agent's context window minus the rest of its prompt (the paper)"
    MINILM_512 = "minilm_512", "512 tokens, the embedding model's window (memweb before issue 28)"


class DMRMParams(StrictBody):
    """DMRM's parameters: all but `write_timing` (a run's choice) are set on the run's bank (the DMRM
    settings page documents each)."""

    alpha: float = pydantic.Field(default=0.5, ge=0.0, le=1.0, description="Learning rate α of the Q update")
    gamma: float = pydantic.Field(default=0.9, ge=0.0, le=1.0, description="Discount γ")
    c_max: int | None = pydantic.Field(default=None, ge=16, le=8000,
                                       description="Token budget C_max; empty: from c_max_rule")
    c_max_rule: CMaxRule = pydantic.Field(
        default=CMaxRule.AGENT_WINDOW, description="C_max when no number is given: the agent's window minus the rest "
                                                   "of its prompt (the paper), or the old fixed 512")
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


# The DMRM paper's n: source memory switched off after this many successful target trajectories.
DMRM_N_SWEEP = (1, 2, 3)
PRESETS = {
    RunPreset.MEMORB_K1: {"memory_mode": MemoryKind.MEMORB, "memory_k": 1},
    RunPreset.MEMORB_STRUCTURED: {"memory_mode": MemoryKind.MEMORB, "reflection_style": ReflectionStyle.STRUCTURED},
    # No transfer: DMRM on a fresh bank, so no source memory M_s, the target memory alone.
    RunPreset.DMRM_NO_TRANSFER: {"memory_mode": MemoryKind.DMRM, "bank_source": ""},
    **{RunPreset(f"dmrm_n{n}"): {"memory_mode": MemoryKind.DMRM, "dmrm.n_success": n} for n in DMRM_N_SWEEP},
    RunPreset.DMRM_TRAIN_TEST: {"memory_mode": MemoryKind.DMRM, "evaluation_mode": EvaluationMode.TRAIN_TEST},
}
DEFAULT_TEST_FRACTION = 0.5
# "Without DMRM" is the run without memory (memory_mode none): no preset is needed.
_PRESET_SECTIONS = {"dmrm": DMRMParams}  # the sections a preset's dotted names reach into
# The paper's agent: an LLM agent with a 4k-token context window, with memory (MemOrb) or without
# (the No-Memory baseline), so every arm of a comparison gets the same window.
LLM_CONTEXT_TOKENS = 4096


class RunSpec(StrictBody):
    """Everything a launch needs; the API takes it as its body, the launch form builds it."""

    name: str = pydantic.Field(min_length=1, max_length=200)
    task_set: str = pydantic.Field(default="", max_length=100, description="Task set name; the built-in set when empty")
    domain: str = ""
    split: str = ""
    task_ids: list[str] = pydantic.Field(default_factory=list, description="External task ids; empty = all selected")
    agent: AgentConfig = pydantic.Field(default_factory=AgentConfig)
    customer: CustomerConfig = pydantic.Field(default_factory=CustomerConfig)
    memory_mode: str = pydantic.Field(default=NO_MEMORY, max_length=64,
                                      description="A registered memory layer (docs/MEMORY_LAYERS.md)")
    memory_k: int = pydantic.Field(default=5, ge=1, le=50, description="Memories retrieved per query")
    dmrm: DMRMParams | None = pydantic.Field(
        default=None, description="DMRM runs: the bank's parameters; empty keeps the copied bank's (or the defaults)")
    external_url: str = pydantic.Field(
        default="", max_length=500, pattern=r"^(https?://\S+)?$",
        description="External memory layers: the service's base URL (docs/memory-layer-contract.openapi.json)")
    external_key: str = pydantic.Field(
        default="", max_length=500, exclude=True, json_schema_extra={"writeOnly": True},
        description="External memory layers: the key sent to the service; kept apart from the run's settings, never "
                    "shown or exported")
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
    memory_effects: bool = pydantic.Field(
        default=False, description="Effect-measurement mode: retrieved memories are withheld at random "
                                   f"(withhold_probability, {EFFECT_WITHHOLD_PROBABILITY} when not given or 0) so each "
                                   "memory's effect can be measured; off, the agent sees every retrieved memory")
    withhold_probability: float = pydantic.Field(
        default=DEFAULT_WITHHOLD_PROBABILITY, ge=0.0, le=MAX_WITHHOLD_PROBABILITY,
        description="Effect-measurement mode only: chance that a retrieved Orb is kept out of an episode's prompt, "
                    "decided once per (episode, Orb) from the seed")
    bank_source: str = pydantic.Field(default="", max_length=200, description="Bank to copy; a fresh bank when empty")
    evaluation_mode: EvaluationMode = pydantic.Field(
        default=EvaluationMode.REPLAY,
        description="replay: every trial plays every task (within-task learning); held_out: every trial plays both "
                    "splits, memory learns from the train split only, success is reported on the test split "
                    "(transfer); train_test: the first train_trials trials play the train split, the rest the test "
                    "split with memory frozen (DMRM's protocol)")
    split_rule: SplitRule = pydantic.Field(
        default=SplitRule.FRACTION,
        description="Held-out modes: fraction holds out test_fraction of the tasks of each domain, chosen by the seed; "
                    "task_set uses the tasks' own split labels (train is train, test and dev are test)")
    test_fraction: float = pydantic.Field(
        default=DEFAULT_TEST_FRACTION, gt=0.0, lt=1.0, description="Held-out modes with the fraction rule: the share "
                                                                   "of each domain's tasks held out for testing")
    train_trials: int | None = pydantic.Field(
        default=None, ge=1, lt=MAX_TRIALS,
        description="train_test mode: trials (epochs) that play the train split; empty = half the trials")
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
        default=MAX_FEEDBACK_ROUNDS, ge=1, le=MAX_FEEDBACK_ROUNDS,
        description="Feedback runs: turns of feedback per episode at most (MemoryBench's up to 3); after each but "
                    "the last, while the user goes on, the agent answers the critique and the user judges the answer")
    feedback_calibration: FeedbackCalibration = pydantic.Field(
        default=FeedbackCalibration.REFERENCE,
        description="Feedback runs: where the like/dislike model takes p(S) from. reference (MemoryBench's "
                    "distribution) lets like rates rank systems; realised calibrates each trial on the run's earlier "
                    "scores, which pins every run's like rate at the target")

    @pydantic.field_validator("memory_mode")
    @classmethod
    def _registered_layer(cls, name: str) -> str:
        return memory_layer_validate(name)

    @pydantic.model_validator(mode="after")
    def _preset_fills_its_fields(self):
        """The preset's values for the fields not given; a given one that differs is refused at launch.
        A dotted name ("dmrm.n_success") is a field of a section, which is created when absent."""
        for name, value in PRESETS.get(self.preset, {}).items():
            section, field = self._section_of(name)
            if field not in section.model_fields_set:
                setattr(section, field, value)
        return self

    @pydantic.model_validator(mode="after")
    def _effect_mode_withholds(self):
        if self.memory_effects and not self.withhold_probability:
            self.withhold_probability = EFFECT_WITHHOLD_PROBABILITY
        return self

    def _section_of(self, name: str) -> tuple[pydantic.BaseModel, str]:
        if "." not in name:
            return self, name
        section, field = name.split(".", 1)
        if getattr(self, section) is None:
            setattr(self, section, _PRESET_SECTIONS[section]())
        return getattr(self, section), field

    def train_trials_resolved(self) -> int:
        """The train_test mode's training trials (half the trials when not given); 0 in other modes."""
        if self.evaluation_mode != EvaluationMode.TRAIN_TEST:
            return 0
        return self.train_trials or max(1, self.trials // 2)

    def preset_conflicts(self) -> list[tuple[str, str]]:
        values = {name: getattr(*self._section_of(name)) for name in PRESETS.get(self.preset, {})}
        return [(name, f"the preset {self.preset} sets {name} to {value}, got {values[name]}")
                for name, value in PRESETS.get(self.preset, {}).items() if values[name] != value]

    def withholding_conflicts(self) -> list[tuple[str, str]]:
        """Withholding only as the explicit effect-measurement mode (whether the memory layer has
        anything to withhold is the layer's launch check)."""
        if self.withhold_probability and not self.memory_effects:
            return [("withhold_probability", "withholding is the effect-measurement mode: set memory_effects to "
                                             "true, or leave withhold_probability at 0")]
        return []


class SettingRole(models.TextChoices):
    """What a comparison of two runs makes of a difference in a setting (runs.services.compare)."""

    MEMORY = "memory", "the memory configuration under test: what a comparison measures"
    IDENTITY = "identity", "changes what the agent, customer or tasks do: compared arms must agree"
    BOOKKEEPING = "bookkeeping", "changes nothing an episode does"


_M, _I, _B = SettingRole.MEMORY, SettingRole.IDENTITY, SettingRole.BOOKKEEPING
# Every RunSpec field by role; a test fails on a field left out, so no new setting can slip past the
# compare page. Reflection style and the preset are memory: how memories are written is the memory
# under test (the paper's structured-reflection ablation compares exactly that).
SETTING_ROLES: dict[str, SettingRole] = {
    "name": _B, "concurrency": _B, "pass_k": _B, "external_key": _B,
    "task_set": _I, "domain": _I, "split": _I, "task_ids": _I, "agent": _I, "customer": _I, "max_turns": _I,
    "memory_effects": _I, "withhold_probability": _I, "trials": _I, "seed": _I, "feedback_enabled": _I,
    "feedback_rounds": _I, "feedback_calibration": _I,
    "evaluation_mode": _I, "split_rule": _I, "test_fraction": _I, "train_trials": _I,
    "memory_mode": _M, "memory_k": _M, "dmrm": _M, "external_url": _M, "approved_only": _M, "same_customer_only": _M,
    "reflection_style": _M, "reflection_input": _M, "preset": _M, "per_turn": _M, "bank_source": _M, "review_gate": _M,
    "feedback_memory": _M,
}


def settings_of_role(role: SettingRole) -> list[str]:
    return [name for name, given in SETTING_ROLES.items() if given == role]


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


# --- a run's spec as stored (EvaluationRun.spec) ---------------------------------------------

# The shape of a stored spec. Bump it when a change to RunSpec makes stored specs invalid (a field
# renamed, a meaning changed), and add to _UPGRADES the step that rewrites the old shape.
SPEC_VERSION = 1
# version -> a function that turns a stored spec of that version into one of the next version.
_UPGRADES: dict[int, object] = {}


class StoredSpecError(ValueError):
    """A stored spec that no upgrade path turns into today's RunSpec."""


def run_spec_stored(spec: RunSpec) -> dict:
    """The value a run keeps: every field, defaults included, so that a later change of a default
    never changes what an old run says it was launched with."""
    return spec.model_dump(mode="json")


def _upgraded(stored: dict, version: int) -> dict:
    if not 1 <= version <= SPEC_VERSION:
        raise StoredSpecError(f"spec version {version} is not one this memweb reads (1 to {SPEC_VERSION})")
    data = dict(stored)
    for step in range(version, SPEC_VERSION):
        data = _UPGRADES[step](data)
    return data


def spec_upgrade(stored: dict, version: int) -> RunSpec:
    """A stored spec of `version` as today's RunSpec, each upgrade step applied in turn; StoredSpecError
    when it is not valid (an import file's spec)."""
    data = _upgraded(stored, version)
    try:
        return RunSpec.model_validate(data)
    except pydantic.ValidationError as exc:
        raise StoredSpecError(f"stored spec (version {version}) is not valid: {exc}") from None


def spec_read(stored: dict, version: int) -> tuple[RunSpec, list[str]]:
    """A run's stored spec as today's RunSpec for showing and using it, and the settings that are not
    valid in it (written around memweb, straight into the database): those read as their defaults,
    so that one bad value does not close every page of the run."""
    return _validated_leniently(_upgraded(stored, version))


def _known(model: type[pydantic.BaseModel], values: dict | None) -> dict:
    return {name: value for name, value in (values or {}).items() if name in model.model_fields}


def _section(model: type[pydantic.BaseModel], values: dict | None) -> dict | None:
    """A stored config as a spec section: the fields the model knows, or its defaults where they are
    not valid (an imported run's agent from elsewhere, with backend "external")."""
    known = _known(model, values)
    for attempt in (known, {name: value for name, value in known.items() if name != "backend"}):
        try:
            return model.model_validate(attempt).model_dump(mode="json")
        except pydantic.ValidationError:
            continue
    return None


def _held_out_settings(columns: dict) -> dict:
    """Replay runs kept empty held-out columns; a held-out run's test fraction was 0 under the task
    set rule. Either way the spec's default stands for what the run never used."""
    if columns.get("evaluation_mode", EvaluationMode.REPLAY) == EvaluationMode.REPLAY:
        return {}
    settings = {"evaluation_mode": columns["evaluation_mode"]}
    if columns.get("split_rule"):
        settings["split_rule"] = columns["split_rule"]
    if columns.get("test_fraction"):
        settings["test_fraction"] = columns["test_fraction"]
    if columns.get("train_trials"):
        settings["train_trials"] = columns["train_trials"]
    return settings


def spec_from_columns(columns: dict) -> tuple[RunSpec, list[str]]:
    """The spec that a run's old setting columns (EvaluationRun before its spec was one value, and an
    export file of format version 1) say it had, and the settings that had to take their defaults
    because the stored value is not one today's RunSpec accepts (an imported run from elsewhere)."""
    memory_mode = columns.get("memory_mode") or MemoryKind.NONE
    data = {
        "name": columns.get("name") or "run", "task_set": columns.get("task_set") or "",
        "domain": columns.get("task_domain", ""), "split": columns.get("task_split", ""),
        "task_ids": columns.get("task_ids") or [], "agent": _section(AgentConfig, columns.get("agent_config")),
        "customer": _section(CustomerConfig, columns.get("customer_config")), "memory_mode": memory_mode,
        "memory_k": columns.get("memory_k"), "approved_only": columns.get("memory_approved_only"),
        "same_customer_only": columns.get("memory_same_customer_only"), "per_turn": columns.get("memory_per_turn"),
        "reflection_style": columns.get("reflection_style"), "reflection_input": columns.get("reflection_input"),
        "preset": columns.get("preset") or None, "memory_effects": bool(columns.get("withhold_probability")),
        "withhold_probability": columns.get("withhold_probability"), "bank_source": columns.get("bank_copied_from"),
        "trials": columns.get("trials"), "pass_k": columns.get("pass_k"), "seed": columns.get("seed"),
        "max_turns": columns.get("max_turns"), "concurrency": columns.get("concurrency"),
        "review_gate": columns.get("review_gate"), "feedback_enabled": columns.get("feedback_enabled"),
        "feedback_memory": columns.get("feedback_memory"), "feedback_rounds": columns.get("feedback_rounds"),
        "feedback_calibration": columns.get("feedback_calibration"), **_held_out_settings(columns),
        "dmrm": _section(DMRMParams, columns.get("dmrm_config"))
        if _takes_dmrm_params(memory_mode) and columns.get("dmrm_config") else None,
    }
    return _validated_leniently({name: value for name, value in data.items() if value is not None})


def _takes_dmrm_params(memory_mode: str) -> bool:
    layer = memory_layers().get(memory_mode)
    return bool(layer and layer.uses_dmrm_params)


def _validated_leniently(data: dict) -> tuple[RunSpec, list[str]]:
    """RunSpec of `data`, the fields it refuses left at their defaults (and named)."""
    try:
        return RunSpec.model_validate(data), []
    except pydantic.ValidationError as exc:
        faulty = sorted({str(error["loc"][0]) for error in exc.errors() if error["loc"]} - {"name"})
    try:
        return RunSpec.model_validate({name: value for name, value in data.items() if name not in faulty}), faulty
    except pydantic.ValidationError:  # the settings together break a rule of the whole spec
        return RunSpec.model_validate({"name": data.get("name") or "run"}), sorted(set(data) - {"name"})


# --- the run page's settings panel -----------------------------------------------------------

ROLE_TITLES = {SettingRole.MEMORY: "Memory under test", SettingRole.IDENTITY: "Agent, customer and tasks",
               SettingRole.BOOKKEEPING: "Bookkeeping"}


def setting_label(name: str) -> str:
    return name.replace("_", " ").capitalize()


def setting_text(value: object) -> str:
    """A setting's value in words: yes/no, a choice by its label, a list joined, a section as its fields."""
    if value is None or value == "" or value == [] or value == {}:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, pydantic.BaseModel):
        return " · ".join(f"{name.replace('_', ' ')} {setting_text(item)}"
                          for name, item in value.model_dump(mode="json").items())
    if isinstance(value, dict):
        return ", ".join(f"{name} {setting_text(item)}" for name, item in value.items())
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, models.Choices):
        return str(value.label)
    return str(value)


def spec_panel(spec: RunSpec, *, unused: frozenset[str] = frozenset()) -> list[dict]:
    """Every field of the spec with its value and description, grouped by its role (SETTING_ROLES);
    a field without a role yet is shown under bookkeeping rather than hidden. `unused`: the settings
    the run's memory layer ignores, marked so."""
    groups = {role: [] for role in ROLE_TITLES}
    for name, info in type(spec).model_fields.items():
        if info.exclude:  # a secret (an external layer's key): kept apart, never shown back
            continue
        groups[SETTING_ROLES.get(name, SettingRole.BOOKKEEPING)].append(
            {"name": name, "label": setting_label(name), "value": setting_text(getattr(spec, name)),
             "description": info.description or "", "unused": name in unused})
    return [{"role": role.value, "title": ROLE_TITLES[role], "settings": settings}
            for role, settings in groups.items() if settings]


def spec_as_columns(spec: RunSpec) -> dict:
    """The spec under the names and in the shapes of the setting columns runs had before it was one
    value, for clients that still read those (the API's run answer, an export's run header)."""
    held_out = spec.evaluation_mode != EvaluationMode.REPLAY
    by_fraction = held_out and spec.split_rule == SplitRule.FRACTION
    return {
        "task_domain": spec.domain, "task_split": spec.split, "task_ids": spec.task_ids,
        "agent_config": spec.agent.model_dump(mode="json"), "customer_config": spec.customer.model_dump(mode="json"),
        "memory_k": spec.memory_k, "memory_approved_only": spec.approved_only,
        "memory_same_customer_only": spec.same_customer_only, "memory_per_turn": spec.per_turn,
        "reflection_style": spec.reflection_style.value, "reflection_input": spec.reflection_input.value,
        "preset": spec.preset.value if spec.preset else "", "withhold_probability": spec.withhold_probability,
        "trials": spec.trials, "pass_k": spec.pass_k, "seed": spec.seed, "max_turns": spec.max_turns,
        "concurrency": spec.concurrency, "review_gate": spec.review_gate.value,
        "feedback_enabled": spec.feedback_enabled, "feedback_memory": spec.feedback_memory.value,
        "feedback_rounds": spec.feedback_rounds, "feedback_calibration": spec.feedback_calibration.value,
        "evaluation_mode": spec.evaluation_mode.value, "split_rule": spec.split_rule.value if held_out else "",
        "test_fraction": spec.test_fraction if by_fraction else 0.0, "train_trials": spec.train_trials_resolved(),
    }
