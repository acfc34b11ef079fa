"""The DMRM JSON API (mounted at /api/orbs/experiences): agents write transitions in
batches and retrieve the prompt block for a step. Bad input is a 422 naming each
field; a batch is written completely or not at all."""
from ninja import Field, Router, Schema
from ninja.errors import HttpError
from ninja.responses import Status

from memweb.auth import api_auth
from memweb.errors import field_errors
from memweb.roles import Role
from memweb.schemas import StrictBody
from orbs.dmrm.services import (
    SourceMemoryReadOnly,
    TransitionError,
    experiences_append_batch,
    experiences_retrieve,
)
from orbs.dmrm.services.learning import Transition
from orbs.models import MemoryBank
from orbs.services import bank_resolve

router = Router(tags=["experience memory (DMRM)"])
WRITE = api_auth(Role.OPERATOR)


class TransitionIn(StrictBody, Schema):
    trajectory_id: str = Field(min_length=1, max_length=200)
    step: int = Field(ge=0, le=2**31 - 1)  # the column is a PostgreSQL integer
    goal: str = Field(min_length=1)
    observation: str = Field(min_length=1)
    action: str = Field(min_length=1)
    reward: float
    next_observation: str = ""
    done: bool = False
    success: bool | None = None
    memory: str = "target"
    domain: str = Field("", max_length=64)
    task_ref: str = Field("", max_length=200)
    run_ref: str = Field("", max_length=200)
    episode_ref: str = Field("", max_length=200)


class TransitionsIn(StrictBody, Schema):
    transitions: list[TransitionIn] = Field(min_length=1, max_length=500)


class EntryOut(Schema):
    id: int
    trajectory_id: str
    step: int
    action: str
    q_value: float
    visits: int


class TransitionsOut(Schema):
    written: int
    entries: list[EntryOut]


class ExperienceRetrieveIn(StrictBody, Schema):
    goal: str = Field(min_length=1)
    observation: str = Field(min_length=1)
    recent_actions: list[str] = []
    client: str = Field("", max_length=200)


class ExperienceHitOut(Schema):
    experience_id: int
    memory: str
    raw_score: float
    score: float
    included: bool
    withheld: bool
    block: int | None
    reason: str
    action: str
    q_value: float
    tokens: int


class ExperienceRetrieveOut(Schema):
    retrieval_id: int
    prompt_block: str
    suppressed: bool
    successful_trajectories: int
    budget_used: int
    c_max: int
    min_similarity: float
    trace: list[ExperienceHitOut]


def _bank(slug: str) -> MemoryBank:
    try:
        return bank_resolve(slug)
    except MemoryBank.DoesNotExist:
        raise HttpError(404, f"No memory bank {slug!r}") from None


@router.post("/banks/{slug}/transitions", response={201: TransitionsOut, 404: dict, 422: dict}, auth=WRITE)
def transitions_write(request, slug: str, payload: TransitionsIn):
    """Append decision steps to the bank's target memory, each trajectory's steps last first (so the
    order they are posted in does not matter), updating their Q-values."""
    bank = _bank(slug)
    transitions = [Transition(**t.dict()) for t in payload.transitions]
    try:
        entries = experiences_append_batch(bank=bank, transitions=transitions)
    except SourceMemoryReadOnly as refused:
        return Status(422, {"detail": str(refused)})
    except TransitionError as invalid:
        return Status(422, field_errors(invalid.problems, prefix=("body", "payload")))
    return Status(201, {"written": len(entries), "entries": entries})


@router.post("/banks/{slug}/retrieve", response={200: ExperienceRetrieveOut, 404: dict}, auth=WRITE)
def retrieve(request, slug: str, payload: ExperienceRetrieveIn):
    """The prompt block for the agent's current step, and the trace of every candidate."""
    result = experiences_retrieve(bank=_bank(slug), goal=payload.goal, observation=payload.observation,
                                  recent_actions=payload.recent_actions, client=payload.client)
    return {**{k: getattr(result, k) for k in ("retrieval_id", "prompt_block", "suppressed",
                                                 "successful_trajectories", "budget_used", "c_max",
                                                 "min_similarity")},
            "trace": [h.trace() for h in result.hits]}
