"""A bank's DMRM memory in the bank's JSONL file (a bank file part: orbs.services.transfer
describes the contract; OrbsConfig.bank_file_parts registers this module).

After the Orbs come the settings (one line), the source memories, the experiences of both
memories (vector, Q-value, visits, bootstraps and review state), the target memory's trajectories
and its applied steps. Rows refer to each other by `key`, the exporting server's id, so the file
can be imported into another server; every line is checked before anything is written.
"""
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

import pydantic
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from memweb.embeddings import SUPPORTED_DIMENSIONS
from orbs.dmrm.models import DMRMSettings, Experience, ExperienceStep, ExperienceTrajectory, SourceMemory
from orbs.dmrm.qlearning import state_key, text_key
from orbs.dmrm.services.learning import SETTINGS_FIELDS
from orbs.services.transfer import ImportReport, line_parse, vector_problem

LINE_TYPES = ("dmrm_settings", "source_memory", "experience", "experience_trajectory", "experience_step")
_SOURCE_COPIED = ("name", "source_domain", "min_reward", "min_q", "gamma", "episodes_read", "created_at",
                  "approved_at", "approval_note")
_EXPERIENCE_COPIED = (
    "memory", "goal", "observation", "action", "reward", "next_observation", "state_key", "next_state_key",
    "action_key", "q_value", "visits", "bootstraps", "trajectory_id", "step", "success", "domain", "task_ref",
    "run_ref", "episode_ref", "embedding_model", "token_length", "status", "reviewed_at", "review_note", "version",
    "flagged_at", "flag_note", "created_at", "updated_at", "needs_review", "customer_key",
)
_TRAJECTORY_COPIED = ("trajectory_id", "domain", "steps", "success", "finished_at", "created_at", "customer_key")


# --- export -------------------------------------------------------------------

def _values(row, names: Iterable[str]) -> dict:
    return {name: (value.isoformat() if isinstance(value := getattr(row, name), datetime) else value)
            for name in names}


def _username(user) -> str | None:
    return user.get_username() if user else None


def export_lines(bank) -> Iterator[dict]:
    """The bank's DMRM memory as file lines (dicts): settings, source memories, experiences,
    trajectories, applied steps."""
    settings = DMRMSettings.objects.filter(bank=bank).first()
    if settings is not None:
        yield {"type": "dmrm_settings", **_values(settings, SETTINGS_FIELDS)}
    for memory in SourceMemory.objects.filter(bank=bank).select_related("created_by").order_by("pk"):
        yield {"type": "source_memory", "key": memory.pk, "created_by": _username(memory.created_by),
               **_values(memory, _SOURCE_COPIED)}
    experiences = Experience.objects.filter(bank=bank).select_related("reviewer").order_by("pk")
    for entry in experiences.iterator(chunk_size=200):
        yield {"type": "experience", "key": entry.pk, "source_memory": entry.source_memory_id,
               "reviewer": _username(entry.reviewer), "vector": [float(x) for x in entry.vector],
               **_values(entry, _EXPERIENCE_COPIED)}
    for trajectory in ExperienceTrajectory.objects.filter(bank=bank).order_by("pk"):
        yield {"type": "experience_trajectory", **_values(trajectory, _TRAJECTORY_COPIED)}
    for step in ExperienceStep.objects.filter(bank=bank).order_by("pk"):
        yield {"type": "experience_step", "trajectory_id": step.trajectory_id, "step": step.step,
               "experience": step.experience_id, "customer_key": step.customer_key}


# --- import: the shape of each line -------------------------------------------

class _Line(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")


class SettingsLine(_Line):
    """The types only: the ranges are the model's validators, checked in _check_settings."""

    type: Literal["dmrm_settings"]
    alpha: float
    gamma: float
    c_max: int
    n_success: int
    suppression_mode: Literal[tuple(DMRMSettings.Suppression.values)]
    source_weight: float
    scan_limit: int
    min_similarity: float
    state_match: Literal[tuple(DMRMSettings.StateMatch.values)]
    state_similarity: float


class SourceMemoryLine(_Line):
    type: Literal["source_memory"]
    key: int
    name: str = pydantic.Field(min_length=1, max_length=100)
    source_domain: str = pydantic.Field(max_length=64)
    min_reward: float
    min_q: float
    gamma: float
    episodes_read: int = pydantic.Field(ge=0)
    created_by: str | None
    created_at: datetime
    approved_at: datetime | None
    approval_note: str


_KEY = pydantic.Field(pattern=r"^[0-9a-f]{64}$")


class ExperienceLine(_Line):
    type: Literal["experience"]
    key: int
    memory: Literal[tuple(Experience.Memory.values)]
    source_memory: int | None
    goal: str = pydantic.Field(min_length=1)
    observation: str = pydantic.Field(min_length=1)
    action: str = pydantic.Field(min_length=1)
    reward: float
    next_observation: str
    state_key: str = _KEY
    next_state_key: str = pydantic.Field(pattern=r"^([0-9a-f]{64})?$")  # empty until the entry learns
    action_key: str = _KEY
    q_value: float
    visits: int = pydantic.Field(ge=0)
    bootstraps: int = pydantic.Field(ge=0)
    trajectory_id: str = pydantic.Field(min_length=1, max_length=200)
    step: int = pydantic.Field(ge=0, le=2**31 - 1)
    success: bool | None
    domain: str = pydantic.Field(max_length=64)
    task_ref: str = pydantic.Field(max_length=200)
    run_ref: str = pydantic.Field(max_length=200)
    episode_ref: str = pydantic.Field(max_length=200)
    vector: list[float] = pydantic.Field(min_length=1)
    embedding_model: str = pydantic.Field(max_length=100)
    token_length: int = pydantic.Field(ge=0)
    status: Literal[tuple(Experience.Status.values)]
    reviewer: str | None
    reviewed_at: datetime | None
    review_note: str
    version: int = pydantic.Field(ge=1)
    flagged_at: datetime | None
    flag_note: str
    created_at: datetime
    updated_at: datetime
    # Absent from exports before issue 30: such entries were served without review, as before.
    needs_review: bool = False
    customer_key: str = pydantic.Field(default="", max_length=200)

    @pydantic.field_validator("vector")
    @classmethod
    def _supported_dimension(cls, vector: list[float]) -> list[float]:
        if len(vector) not in SUPPORTED_DIMENSIONS:
            raise ValueError(f"has {len(vector)} dimensions; stored vectors have "
                             f"{' or '.join(map(str, SUPPORTED_DIMENSIONS))}")
        return vector

    @pydantic.model_validator(mode="after")
    def _keys_match(self):
        # Retrieval and the Q update find entries by these keys: a key that does not match its text
        # would make an entry that no step ever updates.
        if state_key(goal=self.goal, observation=self.observation) != self.state_key:
            raise ValueError("state_key is not the key of (goal, observation): the line was altered")
        if text_key(self.action) != self.action_key:
            raise ValueError("action_key is not the key of the action: the line was altered")
        if (self.memory == Experience.Memory.SOURCE) != (self.source_memory is not None):
            raise ValueError("a source experience names its source memory and a target one none")
        return self


class TrajectoryLine(_Line):
    type: Literal["experience_trajectory"]
    trajectory_id: str = pydantic.Field(min_length=1, max_length=200)
    domain: str = pydantic.Field(default="", max_length=64)  # absent from exports before issue 28
    steps: int = pydantic.Field(ge=0)
    success: bool | None
    finished_at: datetime | None
    created_at: datetime
    customer_key: str = pydantic.Field(default="", max_length=200)  # absent from exports before issue 30


class StepLine(_Line):
    type: Literal["experience_step"]
    trajectory_id: str = pydantic.Field(min_length=1, max_length=200)
    step: int = pydantic.Field(ge=0, le=2**31 - 1)
    experience: int | None
    customer_key: str = pydantic.Field(default="", max_length=200)  # absent from exports before issue 30


_MODELS = {"dmrm_settings": SettingsLine, "source_memory": SourceMemoryLine, "experience": ExperienceLine,
           "experience_trajectory": TrajectoryLine, "experience_step": StepLine}


# --- import: checks across lines ------------------------------------------------

@dataclass
class DMRMLines:
    settings: list[tuple[int, SettingsLine]] = field(default_factory=list)
    source_memories: list[tuple[int, SourceMemoryLine]] = field(default_factory=list)
    experiences: list[tuple[int, ExperienceLine]] = field(default_factory=list)
    trajectories: list[tuple[int, TrajectoryLine]] = field(default_factory=list)
    steps: list[tuple[int, StepLine]] = field(default_factory=list)


_LISTS = {"dmrm_settings": "settings", "source_memory": "source_memories", "experience": "experiences",
          "experience_trajectory": "trajectories", "experience_step": "steps"}


def _parsed(lines: list[tuple[int, str]], report: ImportReport) -> DMRMLines:
    parsed = DMRMLines()
    for number, text in lines:
        kind = json.loads(text)["type"]  # the bank file routed the line here by its type
        line = line_parse(report, number, text, _MODELS[kind])
        if line is not None:
            getattr(parsed, _LISTS[kind]).append((number, line))
    return parsed


def _unique(report: ImportReport, rows: list[tuple[int, object]], identity, field_name: str, what: str) -> set:
    """The identities of `rows`, reporting each row whose identity an earlier row already had."""
    seen = set()
    for number, line in rows:
        if identity(line) in seen:
            report.add(number, field_name, f"{what} appears twice in the file")
        seen.add(identity(line))
    return seen


def _check_settings(report: ImportReport, lines: DMRMLines) -> None:
    for number, _ in lines.settings[1:]:
        report.add(number, "type", "a bank has one line of DMRM settings")
    for number, line in lines.settings[:1]:
        try:
            DMRMSettings(**line.model_dump(include=set(SETTINGS_FIELDS))).full_clean(exclude=["bank"])
        except ValidationError as invalid:
            for name, messages in invalid.message_dict.items():
                report.add(number, name, " ".join(messages))


def _check(report: ImportReport, lines: DMRMLines, bank_name: str, model_name: str) -> None:
    _check_settings(report, lines)
    memories = _unique(report, lines.source_memories, lambda m: m.key, "key", "the same source memory")
    _unique(report, lines.source_memories, lambda m: m.name, "name", "a source memory of this name")
    entries = _unique(report, lines.experiences, lambda e: e.key, "key", "the same experience")
    target = [(n, e) for n, e in lines.experiences if e.memory == Experience.Memory.TARGET]
    _unique(report, target, lambda e: (e.state_key, e.action_key), "action_key",
            "a target entry of this (state, action)")
    _unique(report, lines.trajectories, lambda t: t.trajectory_id, "trajectory_id", "the same trajectory")
    _unique(report, lines.steps, lambda s: (s.trajectory_id, s.step), "step", "the same applied step")
    for number, entry in lines.experiences:
        if entry.source_memory is not None and entry.source_memory not in memories:
            report.add(number, "source_memory", "refers to a source memory that is not in the file")
        if entry.embedding_model != model_name:
            report.add(number, "embedding_model", f"does not match the bank's {model_name}")
        elif (problem := vector_problem(entry.vector, model_name)) is not None:
            report.add(number, "vector", problem)
    for number, step in lines.steps:
        if step.experience is not None and step.experience not in entries:
            report.add(number, "experience", "refers to an experience that is not in the file")
    _check_bank_empty(report, lines, bank_name)


def _check_bank_empty(report: ImportReport, lines: DMRMLines, bank_name: str) -> None:
    """DMRM memory is imported into a bank without any, as Orbs are: merging two Q-tables is not an import."""
    first = min((number for rows in vars(lines).values() for number, _ in rows), default=None)
    if first is None:
        return
    if Experience.objects.filter(bank__name=bank_name).exists() or SourceMemory.objects.filter(
            bank__name=bank_name).exists():
        report.add(first, "type", f"bank {bank_name!r} already holds DMRM memory; import under another name")


def lines_read(lines: list[tuple[int, str]], *, bank_name: str, model_name: str, report: ImportReport) -> DMRMLines:
    """The DMRM lines of a bank file, parsed and checked; every problem is added to `report`."""
    parsed = _parsed(lines, report)
    _check(report, parsed, bank_name, model_name)
    return parsed


# --- import: writing ------------------------------------------------------------

def _review_state(line: ExperienceLine, users: dict, keep_review: bool) -> dict:
    """As for Orbs (orbs.services.transfer): a file's approved experience arrives pending, reviewed
    by nobody here; a copy of this server's own bank keeps its review."""
    if keep_review:
        return {"reviewer": users.get(line.reviewer)}
    # Text from elsewhere waits for a reviewer here before it is served, as an API key's writes do.
    if line.status != Experience.Status.APPROVED:
        return {"reviewer": None, "needs_review": line.needs_review or line.status == Experience.Status.PENDING}
    by = f" by {line.reviewer}" if line.reviewer else ""
    return {"reviewer": None, "status": Experience.Status.PENDING, "reviewed_at": None, "needs_review": True,
            "review_note": f"imported from a bank file: approved elsewhere{by}; waiting for a reviewer here"}


def lines_write(bank, lines: DMRMLines, report: ImportReport, *, keep_review: bool = False) -> None:
    """Write the checked lines into `bank` (inside the import's transaction); `keep_review`: the lines
    are this server's own (a copy), so reviewers and approvals stand."""
    users = {u.get_username(): u for u in get_user_model().objects.all()} if keep_review else {}
    for _, settings in lines.settings:
        DMRMSettings.objects.update_or_create(bank=bank, defaults=settings.model_dump(include=set(SETTINGS_FIELDS)))
    memories = {line.key: SourceMemory.objects.create(
        bank=bank, created_by=users.get(line.created_by), **line.model_dump(include=set(_SOURCE_COPIED)))
        for _, line in lines.source_memories}
    entries = {line.key: Experience(
        bank=bank, source_memory=memories.get(line.source_memory), vector=line.vector,
        **line.model_dump(include=set(_EXPERIENCE_COPIED)) | _review_state(line, users, keep_review))
        for _, line in lines.experiences}
    Experience.objects.bulk_create(entries.values(), batch_size=500)
    ExperienceTrajectory.objects.bulk_create(
        [ExperienceTrajectory(bank=bank, **line.model_dump(include=set(_TRAJECTORY_COPIED)))
         for _, line in lines.trajectories], batch_size=500)
    ExperienceStep.objects.bulk_create(
        [ExperienceStep(bank=bank, trajectory_id=line.trajectory_id, step=line.step,
                        experience=entries.get(line.experience), customer_key=line.customer_key)
         for _, line in lines.steps], batch_size=500)
    report.written |= {"source_memories": len(memories), "experiences": len(entries),
                       "experience_trajectories": len(lines.trajectories), "experience_steps": len(lines.steps)}
