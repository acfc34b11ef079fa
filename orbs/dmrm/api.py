"""The DMRM JSON API (mounted at /api/orbs/experiences): agents write transitions in
batches and retrieve the prompt block for a step; operators read and set a bank's DMRM
settings; both roles that read the DMRM pages list its experiences. Bad input is a 422
naming each field; a batch is written completely or not at all. Building a source memory is a
background job (202 with its status URL)."""

from django.http import HttpResponse
from ninja import Query, Router
from ninja.errors import HttpError
from ninja.pagination import paginate
from ninja.responses import Status

from memweb.auth import api_auth
from memweb.errors import field_errors
from memweb.job_api import job_accepted
from memweb.listing import ApiPagination
from memweb.roles import Role
from memweb.schemas import JobOut
from orbs.api_banks import bank_or_404, open_bank_or_409
from orbs.dmrm.models import Experience
from orbs.dmrm.schemas import (
    DMRMSettingsIn,
    DMRMSettingsOut,
    ExperienceDeleteIn,
    ExperienceListFilters,
    ExperienceOut,
    ExperienceRestoreIn,
    ExperienceRetrieveIn,
    ExperienceRetrieveOut,
    SourceMemoryBuildIn,
    TransitionsIn,
    TransitionsOut,
)
from orbs.dmrm.services import (
    DMRMSettingsInvalid,
    SourceMemoryReadOnly,
    TransitionError,
    dmrm_settings_get,
    dmrm_settings_update,
    experience_delete,
    experience_restore,
    experiences_append_batch,
    experiences_filtered,
    experiences_retrieve,
    source_memory_build_start,
)
from orbs.dmrm.services.learning import Transition
from orbs.errors import InvalidTransition, OrbsError, StaleVersion
from orbs.vocabulary import OrbsScope

router = Router(tags=["experience memory (DMRM)"])
WRITE = api_auth(Role.OPERATOR, scope=OrbsScope.MEMORY_WRITE)
RETRIEVE = api_auth(Role.OPERATOR, scope=OrbsScope.MEMORY_READ)
# Who may open the experience browser and settings pages.
READ = api_auth(Role.REVIEWER, Role.OPERATOR, scope=OrbsScope.MEMORY_READ)
REVIEW = api_auth(Role.REVIEWER, review=True)




























@router.post("/banks/{slug}/transitions", response={201: TransitionsOut, 404: dict, 409: dict, 422: dict},
             auth=WRITE)
def transitions_write(request, slug: str, payload: TransitionsIn):
    """Append decision steps to the bank's target memory, each trajectory's steps last first (so the
    order they are posted in does not matter), updating their Q-values. Behind the bank's review gate
    (`review_api_writes`, on by default) the entries they create are served only once approved."""
    bank = open_bank_or_409(request, slug)
    transitions = [Transition(**t.dict()) for t in payload.transitions]
    try:
        entries = experiences_append_batch(bank=bank, transitions=transitions, through_api=True)
    except SourceMemoryReadOnly as refused:
        return Status(422, {"detail": str(refused)})
    except TransitionError as invalid:
        return Status(422, field_errors(invalid.problems, prefix=("body", "payload")))
    return Status(201, {"written": len(entries), "entries": entries})


@router.post("/banks/{slug}/retrieve", response={200: ExperienceRetrieveOut, 404: dict, 409: dict}, auth=RETRIEVE)
def retrieve(request, slug: str, payload: ExperienceRetrieveIn):
    """The prompt block for the agent's current step, and the trace of every candidate."""
    result = experiences_retrieve(bank=open_bank_or_409(request, slug), goal=payload.goal,
                                  observation=payload.observation, recent_actions=payload.recent_actions,
                                  domain=payload.domain, client=payload.client,
                                  customer_key=payload.customer_key)
    return {**{k: getattr(result, k) for k in ("retrieval_id", "prompt_block", "suppressed",
                                                 "successful_trajectories", "budget_used", "c_max",
                                                 "min_similarity")},
            "trace": [h.trace() for h in result.hits]}


@router.get("/banks/{slug}/settings", response={200: DMRMSettingsOut, 404: dict}, auth=READ)
def settings_read(request, slug: str):
    """The bank's DMRM learning and retrieval parameters (the defaults until someone sets them)."""
    return dmrm_settings_get(bank=bank_or_404(request, slug))


@router.put("/banks/{slug}/settings", response={200: DMRMSettingsOut, 404: dict, 422: dict}, auth=WRITE)
def settings_write(request, slug: str, payload: DMRMSettingsIn):
    """Change the given settings; a value out of range is a 422 naming it, and nothing changes."""
    bank = bank_or_404(request, slug)
    try:
        return dmrm_settings_update(bank=bank, params=payload.model_dump(exclude_none=True))
    except DMRMSettingsInvalid as invalid:
        return Status(422, field_errors(invalid.problems, prefix=("body", "payload")))


@router.get("/banks/{slug}/experiences", response=list[ExperienceOut], auth=READ)
@paginate(ApiPagination, page_size=50)
def experience_list(request, slug: str, filters: Query[ExperienceListFilters]):
    """The bank's experiences of both memories, newest first; every filter optional."""
    return experiences_filtered(bank=bank_or_404(request, slug), filters=filters.to_filters())


@router.get("/banks/{slug}/experiences/{experience_id}", response={200: ExperienceOut, 404: dict}, auth=READ)
def experience_detail(request, slug: str, experience_id: int):
    """One experience of any status (a deleted one shows status deleted)."""
    return _experience_of(request, slug, experience_id)






def _experience_of(request, slug: str, experience_id: int) -> Experience:
    """The bank's experience of any status, deleted ones included; 404 when the bank has none with that id."""
    experience = Experience.objects.select_related("source_memory", "reviewer").defer("vector").filter(
        bank=bank_or_404(request, slug), pk=experience_id).first()
    if experience is None:
        raise HttpError(404, f"No experience #{experience_id} in bank {slug!r}")
    return experience


@router.post("/banks/{slug}/source-memories", response={202: JobOut, 404: dict, 422: dict}, auth=WRITE)
def source_memory_create(request, response: HttpResponse, slug: str, payload: SourceMemoryBuildIn):
    """Build a read-only source memory from the finished episodes of `source_domain` (the steps that
    pass the thresholds, approved by the build). The name and the thresholds are checked now (422);
    a worker embeds and writes: 202 with the job, whose `status_url` (also the Location header)
    says when the memory is there."""
    bank = bank_or_404(request, slug)
    try:
        job = source_memory_build_start(bank=bank, actor=request.auth, **payload.dict())
    except OrbsError as refused:
        field, _, message = str(refused).partition(": ")
        path = field if field in SourceMemoryBuildIn.model_fields else ""
        return Status(422, field_errors([(path, message or str(refused))], prefix=("body", "payload")))
    return job_accepted(request, response, job)
def _experience_refusals(action):
    """A stale version is a 409, as is an action the experience's status does not allow; other refusals 422."""
    try:
        return action()
    except (StaleVersion, InvalidTransition) as refused:
        return Status(409, {"detail": str(refused)})
    except OrbsError as refused:
        return Status(422, {"detail": str(refused)})


@router.delete("/banks/{slug}/experiences/{experience_id}", response={200: ExperienceOut, 404: dict, 409: dict,
                                                                     422: dict}, auth=REVIEW)
def experience_delete_view(request, slug: str, experience_id: int, payload: ExperienceDeleteIn):
    """Soft-delete: never retrieved again, out of the lists (`?status=deleted` shows it), restorable;
    deleting it again answers the same."""
    pk = _experience_of(request, slug, experience_id).pk
    return _experience_refusals(lambda: experience_delete(experience_id=pk, actor=request.auth, **payload.dict()))


@router.post("/banks/{slug}/experiences/{experience_id}/restore",
             response={200: ExperienceOut, 404: dict, 409: dict, 422: dict}, auth=REVIEW)
def experience_restore_view(request, slug: str, experience_id: int, payload: ExperienceRestoreIn):
    pk = _experience_of(request, slug, experience_id).pk
    return _experience_refusals(lambda: experience_restore(experience_id=pk, actor=request.auth, **payload.dict()))
