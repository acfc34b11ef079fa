"""The Orbs JSON API: agents write episodes and retrieve memories; reviewers review.

Agents and operators (role operator) write and retrieve; reviewers review;
both read. Errors are `{"detail": ...}`: 404 unknown bank or Orb, 409 a
stale review (ConflictOut) or a deleted (archived) bank, 422 invalid input naming each field.
"""
from functools import wraps

from django.http import HttpResponse, StreamingHttpResponse
from django.urls import reverse
from ninja import File, Form, Query, Router
from ninja.errors import HttpError
from ninja.files import UploadedFile
from ninja.pagination import paginate
from ninja.responses import Status

from memweb.auth import api_auth, request_by_key
from memweb.downloads import attachment
from memweb.job_api import job_accepted, job_out
from memweb.listing import ApiPagination
from memweb.roles import Role
from memweb.schemas import ErrorOut, JobOut
from orbs.api_banks import bank_or_404, open_bank_or_409
from orbs.dmrm.api import router as dmrm_router
from orbs.dmrm.services import dmrm_stats
from orbs.errors import FieldRequired, InvalidTransition, OrbConflict, OrbsError
from orbs.models import EpisodeRecord, MemoryBank, Orb, RetrievalLog, ReviewEvent, Source
from orbs.schemas import (
    ApproveIn,
    BankCopyIn,
    BankDeleteIn,
    BankEventOut,
    BankHistoryOut,
    BankIn,
    BankOut,
    BankRestoreIn,
    BankStatsOut,
    BulkReviewIn,
    BulkReviewOut,
    ConflictOut,
    DeleteIn,
    EditIn,
    EpisodeIn,
    EpisodeQueuedOut,
    ErasureIn,
    ImportReportOut,
    IngestOut,
    MergeIn,
    OrbDetailOut,
    OrbListFilters,
    OrbOut,
    OrbRevisionsOut,
    ProposalFilters,
    ProposalIn,
    ProposalOut,
    RejectIn,
    RememberIn,
    RestoreIn,
    RetrievalOutcomeIn,
    RetrieveIn,
    RetrieveOut,
)
from orbs.services import (
    bank_copy_start,
    bank_export,
    bank_get_or_create,
    bank_import_start,
    bank_stats,
    episode_reflect,
    episode_submit,
    orb_approve,
    orb_current,
    orb_edit,
    orb_merge,
    orb_reject,
    orb_remember,
    orb_revisions,
    orbs_bulk_review,
    orbs_retrieve,
    retrieval_outcome_record,
)
from orbs.services.banks import approval_policy_refusal
from orbs.services.deletion import bank_archive, bank_events, bank_restore, orb_delete, orb_restore
from orbs.services.erasure import customer_erasure_start
from orbs.services.history import history_status, history_verify_start
from orbs.services.proposals import proposal_create, proposals_listed
from orbs.services.queue import orbs_queue
from orbs.vocabulary import OrbsScope

router = Router(tags=["orbs"])
router.add_router("/experiences", dmrm_router)
WRITE = api_auth(Role.OPERATOR, scope=OrbsScope.MEMORY_WRITE)
READ = api_auth(Role.OPERATOR, Role.REVIEWER, scope=OrbsScope.MEMORY_READ)
# An agent's retrieval, and how it went: operators' routes that only read memories.
RETRIEVE = api_auth(Role.OPERATOR, scope=OrbsScope.MEMORY_READ)
REVIEW = api_auth(Role.REVIEWER, review=True)
REVIEW_RESPONSES = {200: OrbOut, 404: ErrorOut, 409: ConflictOut, 422: ErrorOut}




def _orb(request, orb_id: int) -> Orb:
    """The current revision of the Orb named by its stable id or any revision's id, in the
    request's workspace (404 otherwise). Review routes look it up first so that the services,
    which take ids, never touch another workspace's Orb."""
    try:
        return orb_current(orb_id=orb_id, queryset=Orb.objects.select_related("bank", "reviewer"))
    except Orb.DoesNotExist:
        raise HttpError(404, f"No Orb #{orb_id}") from None


def _events_by_revision(orb: Orb) -> dict[int, list[ReviewEvent]]:
    events = ReviewEvent.objects.filter(orb__lineage_id=orb.lineage_id).select_related("orb").defer("orb__vector")
    by_revision: dict[int, list[ReviewEvent]] = {}
    for event in events.order_by("at", "id"):
        by_revision.setdefault(event.orb.revision, []).append(event)
    return by_revision


def _review_errors(view):
    """Service refusals as HTTP answers: stale version 409 with the current state, others 409/422."""
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except Orb.DoesNotExist:
            raise HttpError(404, "No such Orb") from None
        except OrbConflict as conflict:
            return Status(409, {"detail": str(conflict), "orb_id": conflict.orb_id,
                                "current_version": conflict.current_version, "current_status": conflict.current_status})
        except InvalidTransition as refused:
            return Status(409, {"detail": str(refused)})
        except OrbsError as refused:
            return Status(422, {"detail": str(refused)})
    return wrapped


# --- banks ------------------------------------------------------------------

@router.get("/banks", response=list[BankOut], auth=READ)
def bank_list(request, archived: bool = False):
    """The banks in use; `?archived=true` lists the deleted (archived) ones instead."""
    return MemoryBank.objects.filter(archived_at__isnull=not archived)


@router.post("/banks", response={201: BankOut, 403: ErrorOut, 422: ErrorOut}, auth=WRITE)
def bank_create(request, payload: BankIn):
    """A new bank. Its approval policy (approved_only, auto_approve, auto_approve_min_reward) is the
    review gate: only a reviewer's signed-in session may set it (403 for a key, or a session without
    the reviewer role, that sends values other than the defaults)."""
    refused = approval_policy_refusal(policy=payload.dict(exclude_unset=True), by_key=request_by_key(request),
                                      user=request.auth)
    if refused:
        return Status(403, {"detail": refused})
    if MemoryBank.all_workspaces.filter(name=payload.name).exists():
        return Status(422, {"detail": f"name: a bank called {payload.name!r} already exists"})
    return Status(201, bank_get_or_create(workspace=request.workspace, **payload.dict()))


# Declared before /banks/{slug}, whose pattern would otherwise take the path.
@router.post("/banks/import", response={202: JobOut, 422: ImportReportOut}, auth=WRITE)
def bank_import_jsonl(request, response: HttpResponse, file: File[UploadedFile], name: Form[str] = ""):
    """Import an exported bank (all lines or nothing); `name` imports it under another name. Every
    line is checked now (422 lists the problems by line); a worker writes them: 202 with the job,
    whose `status_url` (also the Location header) says when the bank is there."""
    report, job = bank_import_start(upload=file, name=name.strip() or None, user=request.auth,
                                    workspace=request.workspace)
    if job is None:
        return Status(422, report.as_dict())
    return job_accepted(request, response, job)


@router.get("/banks/{slug}", response=BankOut, auth=READ)
def bank_detail(request, slug: str):
    return bank_or_404(request, slug)


@router.get("/banks/{slug}/stats", response=BankStatsOut, auth=READ)
def bank_statistics(request, slug: str):
    bank = bank_or_404(request, slug)
    return bank_stats(bank=bank) | {"dmrm": dmrm_stats(bank=bank)}


@router.post("/banks/{slug}/copy", response={202: JobOut, 404: ErrorOut, 422: ErrorOut}, auth=WRITE)
def bank_copy_json(request, response: HttpResponse, slug: str, payload: BankCopyIn):
    """Copy the bank (Orbs, history, DMRM memory) under a new name, as a background job: 202 with
    its `status_url` (also the Location header); 422 when the name is taken."""
    bank = bank_or_404(request, slug)
    try:
        job = bank_copy_start(source=bank, name=payload.name, user=request.auth)
    except OrbsError as refused:
        return Status(422, {"detail": str(refused)})
    return job_accepted(request, response, job)


@router.get("/banks/{slug}/history", response=BankHistoryOut, auth=READ)
def bank_history(request, slug: str):
    """The bank's hash chain checked (review events, Orb revisions, source-memory builds): now for a
    short chain, else the latest check job's result, with that job (`job.status_url`)."""
    status = history_status(bank=bank_or_404(request, slug))
    return status | {"job": job_out(request, status["job"]) if status["job"] else None}


@router.post("/banks/{slug}/history/verify", response={202: JobOut, 404: ErrorOut}, auth=READ)
def bank_history_verify(request, response: HttpResponse, slug: str):
    """Check the bank's hash chain as a background job: 202 with its `status_url` (also the Location
    header); the job's result is the check."""
    return job_accepted(request, response, history_verify_start(bank=bank_or_404(request, slug), user=request.auth))


@router.get("/banks/{slug}/export", auth=READ)
def bank_export_jsonl(request, slug: str):
    """The bank as JSON Lines: line 1 the bank, then every Orb with revisions, vector and review history."""
    bank = bank_or_404(request, slug)
    response = StreamingHttpResponse(bank_export(bank=bank), content_type="application/x-ndjson")
    return attachment(response, filename=f"{bank.slug}.jsonl")


# --- episodes -> Orbs ----------------------------------------------------------

def _ingest_out(record: EpisodeRecord) -> dict:
    return {
        "ingest_id": record.pk, "status": record.status, "orb": record.orb, "error": record.error,
        "created": record.created_orb if record.orb else None,
        "near_duplicate_of_id": record.orb.near_duplicate_of.lineage_id if record.orb and record.orb.near_duplicate_of_id
        else None,
    }


@router.post("/banks/{slug}/episodes", auth=WRITE,
             response={200: IngestOut, 201: IngestOut, 202: EpisodeQueuedOut, 404: ErrorOut, 409: ErrorOut,
                       422: IngestOut | ErrorOut})
def episode_write(request, response: HttpResponse, slug: str, payload: EpisodeIn, sync: bool = False):
    """Store a finished episode; its reflection into an Orb runs as a background task (202 with
    a status URL), or right away with `?sync=true` (201 new Orb, 200 the same Orb already stored)."""
    bank = open_bank_or_409(request, slug)
    try:
        record = episode_submit(bank=bank, trajectory=payload.trajectory, source_label=payload.source_label,
                                episode_ref=payload.episode_ref, source=Source.API, user=request.auth,
                                queue=not sync)
    except FieldRequired as missing:
        raise HttpError(422, str(missing)) from None
    if not sync:
        url = request.build_absolute_uri(reverse("api:orbs_episode_status", kwargs={"ingest_id": record.pk}))
        response["Location"] = url
        return Status(202, {"ingest_id": record.pk, "status": record.status, "status_url": url})
    record = episode_reflect(ingest_id=record.pk)
    if record.status == EpisodeRecord.Status.FAILED:
        return Status(422, _ingest_out(record))
    return Status(201 if record.created_orb else 200, _ingest_out(record))


@router.post("/banks/{slug}/remember", response={200: OrbOut, 201: OrbOut, 404: ErrorOut, 409: ErrorOut,
                                                  422: ErrorOut},
             auth=WRITE)
@_review_errors
def lesson_remember(request, slug: str, payload: RememberIn):
    """Remember a lesson given as text (no trajectory): a new Orb (201) that passes the bank's
    review gate like an episode's, or the same lesson already stored (200)."""
    result = orb_remember(bank=open_bank_or_409(request, slug), actor=request.auth, **payload.dict())
    return Status(201 if result.created else 200, result.orb)


@router.get("/episodes/{ingest_id}", response={200: IngestOut, 404: ErrorOut}, auth=WRITE,
            url_name="orbs_episode_status")
def episode_status(request, ingest_id: int):
    records = EpisodeRecord.objects.select_related("orb__bank", "orb__reviewer")
    record = records.filter(pk=ingest_id).first()
    if record is None:
        raise HttpError(404, f"No episode #{ingest_id}")
    return _ingest_out(record)


# --- retrieval --------------------------------------------------------------------

@router.post("/banks/{slug}/retrieve", response={200: RetrieveOut, 404: ErrorOut, 409: ErrorOut, 422: ErrorOut},
             auth=RETRIEVE)
@_review_errors
def retrieve(request, slug: str, payload: RetrieveIn):
    """q' = rewrite(query ⊕ context), embedded, top-k Orbs by cosine similarity, plus a prompt block."""
    bank = open_bank_or_409(request, slug)
    asked = payload.dict()
    asked["approved_only"] = bank.approved_only if payload.approved_only is None else payload.approved_only
    result = orbs_retrieve(bank=bank, **asked)
    return {
        "retrieval_id": result.retrieval_id, "rewritten_query": result.rewritten_query,
        "rewriter_backend": result.rewriter_backend, "prompt_block": result.prompt_block,
        "injected": result.injected_count,
        "hits": [{"rank": hit.rank, "score": hit.score, "injected": hit.injected, "orb": hit.orb} for hit in result.hits],
    }


@router.post("/retrievals/{retrieval_id}/outcome", response={200: ErrorOut, 404: ErrorOut}, auth=RETRIEVE)
def retrieval_outcome(request, retrieval_id: int, payload: RetrievalOutcomeIn):
    """Tell memweb how the episode that used this retrieval ended (shown on each hit Orb's page)."""
    mine = RetrievalLog.objects.filter(pk=retrieval_id).values_list("pk", flat=True)
    if not retrieval_outcome_record(retrieval_ids=list(mine), **payload.dict()):
        raise HttpError(404, f"No retrieval #{retrieval_id}")
    return {"detail": "recorded"}


# --- reading Orbs --------------------------------------------------------------------

@router.get("/orbs", response=list[OrbOut], auth=READ)
@paginate(ApiPagination, page_size=50)
def orb_list(request, filters: Query[OrbListFilters]):
    """Pending first, oldest first; every filter optional. An unknown bank is a 404, not an empty list."""
    if filters.bank:
        bank_or_404(request, filters.bank)
    return orbs_queue(filters=filters.to_filters())


# Declared before /orbs/{orb_id}, whose pattern would otherwise take the path.
@router.post("/orbs/bulk", response={200: BulkReviewOut, 404: ErrorOut, 409: ConflictOut, 422: ErrorOut}, auth=REVIEW)
@_review_errors
def orb_bulk(request, payload: BulkReviewIn):
    """Approve or reject a selection: every Orb, or none when any of them is stale."""
    for item in payload.items:
        _orb(request, item.id)
    orbs = orbs_bulk_review(action=payload.action, items=[(i.id, i.expected_version) for i in payload.items],
                            actor=request.auth, reason=payload.note)
    return {"action": payload.action, "orbs": orbs}


@router.get("/orbs/{orb_id}", response={200: OrbDetailOut, 404: ErrorOut}, auth=READ)
def orb_detail(request, orb_id: int):
    """The Orb's current revision, named by its stable id or any revision's id, with the review
    history of all its revisions."""
    orb = _orb(request, orb_id)
    orb.history = [event for events in _events_by_revision(orb).values() for event in events]
    return orb


@router.get("/orbs/{orb_id}/revisions", response={200: OrbRevisionsOut, 404: ErrorOut}, auth=READ)
def orb_revision_list(request, orb_id: int):
    """Every revision of the Orb, oldest first, each with its review events (the audit chain)."""
    orb = _orb(request, orb_id)
    events = _events_by_revision(orb)
    revisions = orb_revisions(orb=orb)
    for revision in revisions:
        revision.revision_events = events.get(revision.revision, [])
    return {"id": orb.lineage_id, "current_revision": orb.revision, "revisions": revisions}


# --- review ---------------------------------------------------------------------

@router.post("/orbs/{orb_id}/approve", response=REVIEW_RESPONSES, auth=REVIEW)
@_review_errors
def orb_approve_view(request, orb_id: int, payload: ApproveIn):
    """Body `{"expected_version", "note"}`, the note optional: the shape reject takes too."""
    _orb(request, orb_id)
    return orb_approve(orb_id=orb_id, actor=request.auth, expected_version=payload.expected_version, note=payload.note)


@router.post("/orbs/{orb_id}/reject", response=REVIEW_RESPONSES, auth=REVIEW)
@_review_errors
def orb_reject_view(request, orb_id: int, payload: RejectIn):
    """Body `{"expected_version", "note"}`, as approve takes, the note required: it is the reason."""
    _orb(request, orb_id)
    return orb_reject(orb_id=orb_id, actor=request.auth, expected_version=payload.expected_version,
                      reason=payload.note)


@router.post("/orbs/{orb_id}/edit", response=REVIEW_RESPONSES, auth=REVIEW)
@_review_errors
def orb_edit_view(request, orb_id: int, payload: EditIn):
    """Obs, emotion or outcome changed: a new revision (new hash, re-embedded) under the same stable id,
    the old one superseded; context alone: the current revision updated. Returns the current revision."""
    _orb(request, orb_id)
    return orb_edit(orb_id=orb_id, actor=request.auth, **payload.dict())


@router.post("/orbs/{orb_id}/merge", response=REVIEW_RESPONSES, auth=REVIEW)
@_review_errors
def orb_merge_view(request, orb_id: int, payload: MergeIn):
    """Merge this near-duplicate into `into_id`; returns the kept Orb."""
    _orb(request, orb_id), _orb(request, payload.into_id)
    return orb_merge(orb_id=orb_id, actor=request.auth, **payload.dict())


# --- proposals: an agent asks, a reviewer decides (in the review queue, never by key) --------------

@router.post("/orbs/{orb_id}/proposals", response={201: ProposalOut, 404: ErrorOut, 409: ErrorOut, 422: ErrorOut},
             auth=WRITE)
@_review_errors
def proposal_write(request, orb_id: int, payload: ProposalIn):
    """Propose new text for the Orb (`kind` edit: any of obs, emotion, outcome) or its deletion (`kind`
    delete), with a reason. It waits, pending, until a reviewer accepts (a new revision, or a soft
    delete) or rejects it in the review queue; 409 when the Orb is deleted or superseded."""
    proposal = proposal_create(orb=_orb(request, orb_id), actor=request.auth,
                               api_key=getattr(request, "api_key", None), **payload.dict())
    return Status(201, proposal)


@router.get("/proposals", response=list[ProposalOut], auth=READ)
@paginate(ApiPagination, page_size=50)
def proposal_list(request, filters: Query[ProposalFilters]):
    """Proposals, oldest first; `status`, `bank` (slug) and `orb` (stable id) narrow the list."""
    if filters.bank:
        bank_or_404(request, filters.bank)
    return proposals_listed(status=filters.status, bank_slug=filters.bank, orb_id=filters.orb)


# --- deletion and erasure -------------------------------------------------------------

@router.delete("/orbs/{orb_id}", response=REVIEW_RESPONSES, auth=REVIEW)
@_review_errors
def orb_delete_view(request, orb_id: int, payload: DeleteIn):
    """Soft-delete: the Orb is never retrieved again and leaves the lists (`?status=deleted` shows it);
    its content and history stay, and it can be restored. Deleting it again answers the same."""
    _orb(request, orb_id)
    return orb_delete(orb_id=orb_id, actor=request.auth, **payload.dict())


@router.post("/orbs/{orb_id}/restore", response=REVIEW_RESPONSES, auth=REVIEW)
@_review_errors
def orb_restore_view(request, orb_id: int, payload: RestoreIn):
    """Undo a soft delete: the Orb gets back the status it had."""
    _orb(request, orb_id)
    return orb_restore(orb_id=orb_id, actor=request.auth, **payload.dict())


@router.delete("/banks/{slug}", response={200: BankOut, 404: ErrorOut, 422: ErrorOut}, auth=WRITE)
def bank_delete(request, slug: str, payload: BankDeleteIn | None = None):
    """Delete a bank by archiving it: hidden from the list, no new memories or retrievals (409), its
    pages and those of the runs that used it unchanged. Restorable; deleting it again answers the same."""
    return bank_archive(bank=bank_or_404(request, slug), actor=request.auth, reason=payload.reason if payload else "")


@router.post("/banks/{slug}/restore", response={200: BankOut, 404: ErrorOut, 422: ErrorOut}, auth=WRITE)
def bank_restore_view(request, slug: str, payload: BankRestoreIn | None = None):
    return bank_restore(bank=bank_or_404(request, slug), actor=request.auth, note=payload.note if payload else "")


@router.get("/banks/{slug}/events", response={200: list[BankEventOut], 404: ErrorOut}, auth=RETRIEVE)
def bank_event_list(request, slug: str):
    """The bank's audit trail: archived, restored, customers erased (counts and a hash of the key)."""
    return bank_events(bank=bank_or_404(request, slug))


@router.post("/banks/{slug}/erasures", response={202: JobOut, 404: ErrorOut, 422: ErrorOut}, auth=WRITE)
@_review_errors
def customer_erasure_view(request, response: HttpResponse, slug: str, payload: ErasureIn):
    """Erase one customer's data from the bank (and, with `every_bank`, from every bank): their Orbs and
    vectors, episodes, own retrievals, dialogues and the stored idempotent answers that quote them.
    Irreversible; an audit record without the content is kept per bank. A background job does it:
    202 with the job, whose `status_url` (also the Location header) gives its progress, then the
    counts, the SHA-256 of the key and the audit records' ids in `result`."""
    job = customer_erasure_start(bank=bank_or_404(request, slug), actor=request.auth, **payload.dict())
    return job_accepted(request, response, job)
