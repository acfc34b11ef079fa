"""Review pages: the queue, an Orb's page, review actions, memory banks."""
from django.contrib import messages
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from memweb.downloads import attachment
from memweb.listing import CappedPaginator, Sorting, query_without_page, rows_sorted, sort_state, sorted_page
from memweb.roles import Role, has_role, role_required
from orbs.errors import OrbConflict, OrbsError
from orbs.forms import (
    ApproveForm,
    BankCopyForm,
    BankCreateForm,
    BankDeleteForm,
    BankPolicyForm,
    BulkForm,
    CustomerErasureForm,
    CustomerLookupForm,
    DeleteForm,
    DuplicateMergeForm,
    EditForm,
    ErasureForm,
    ImportForm,
    MergeForm,
    ProposalDecisionForm,
    QueueFilterForm,
    RejectForm,
    RestoreForm,
)
from orbs.models import MemoryBank, Orb, OrbProposal, RetrievalHit, RetrievalLog
from orbs.services import (
    bank_budget_cut,
    bank_copy_start,
    bank_export,
    bank_get_or_create,
    bank_import_start,
    bank_policy_update,
    bank_stats,
    orb_approve,
    orb_current,
    orb_edit,
    orb_merge,
    orb_provenance,
    orb_reject,
    orb_revision,
    orb_revisions,
    orbs_bulk_review,
    orbs_current_only,
    orbs_search,
)
from orbs.services.banks import SETTABLE_FIELDS
from orbs.services.bulk import BULK_CAP, bulk_plan, bulk_review_start
from orbs.services.customers import customer_timeline, timeline_objects
from orbs.services.deletion import bank_archive, bank_events, bank_restore, orb_delete, orb_restore
from orbs.services.duplicates import (
    duplicate_group_of,
    duplicate_groups_in_banks,
    duplicates_merge,
    merge_candidates,
)
from orbs.services.erasure import banks_holding_customer, customer_erasure_start
from orbs.services.history import history_status, history_verify_start
from orbs.services.merge_undo import UNDO_DAYS, merge_undo_state, orb_merge_undo
from orbs.services.proposals import proposal_accept, proposal_reject, proposals_listed
from orbs.services.queue import orbs_filtered, orbs_queue

SEMANTIC_LIMIT = 20
PROPOSALS_SHOWN = 20
READERS = (Role.REVIEWER, Role.OPERATOR)
PAST_TENSE = {"approve": "approved", "reject": "rejected"}
BANK_SORTING = Sorting(columns={
    "bank": "bank.name", "orbs": "stats.total", "pending": "stats.by_status.pending",
    "approved": "stats.by_status.approved", "k": "bank.retrieval_k", "serves": "bank.approved_only",
    "auto": "bank.auto_approve", "retrievals": "stats.retrievals"})
QUEUE_SORTING = Sorting(columns={"orb": "lineage_id", "situation": "obs", "lesson": "outcome", "decision": "status",
                                 "created": "created_at"})


# --- the queue -------------------------------------------------------------------

def _queue_context(request) -> dict:
    form = QueueFilterForm(request.GET or None, workspace=request.workspace)
    context = {"form": form, "semantic": "", "query": query_without_page(request), "bulk_cap": BULK_CAP}
    if form.errors:  # the results say which filter was refused; an unfiltered list would pass for a match
        return context
    filters = form.filters()
    context["bank"] = MemoryBank.objects.filter(slug=filters.bank).first() if filters.bank else None
    semantic = context["semantic"] = form.cleaned_data.get("semantic", "").strip() if form.is_bound else ""
    if semantic:
        context["results"] = orbs_search(text=semantic, queryset=orbs_filtered(filters=filters), limit=SEMANTIC_LIMIT)
        return context
    listed = sorted_page(request, orbs_queue(filters=filters), sorting=QUEUE_SORTING)
    context.update(listed, results=[(orb, None) for orb in listed["page"].object_list])
    return context


def _pending_proposals(request) -> dict:
    """The agents' pending proposals, oldest first, each beside the Orb as it stands now."""
    pending = proposals_listed(status=OrbProposal.Status.PENDING)
    shown = list(pending[:PROPOSALS_SHOWN])
    current = {orb.lineage_id: orb for orb in orbs_current_only(
        Orb.objects.filter(lineage_id__in={p.orb.lineage_id for p in shown}).defer("vector"))}
    for proposal in shown:
        proposal.current = current.get(proposal.orb.lineage_id)
    return {"proposals": shown, "proposals_pending": pending.count()}


@require_GET
@role_required(Role.REVIEWER)
def queue(request):
    context = _queue_context(request)
    if not request.htmx:
        context.update(_pending_proposals(request))
    status = 422 if context["form"].errors else 200
    if request.htmx:
        return render(request, "orbs/_queue_results.html", context, status=status)
    context["duplicate_groups"] = _queue_duplicate_groups(request, context["form"])
    return render(request, "orbs/queue.html", context, status=status)


def _queue_duplicate_groups(request, form) -> list:
    """Pending near-duplicate groups of the banks the queue lists (the bank filter's, else all)."""
    banks = MemoryBank.objects.filter(archived_at__isnull=True)
    bank_slug = form.cleaned_data.get("bank") if form.is_bound and not form.errors else ""
    if bank_slug:
        banks = banks.filter(slug=bank_slug)
    return duplicate_groups_in_banks(banks=banks)


# --- one Orb ----------------------------------------------------------------------

def _orb_or_404(request, orb_id: int, revision: str | None = None, queryset=None) -> Orb:
    """The Orb's current revision (named by its stable id or any revision's id), or the `revision`
    asked for, in the request's workspace."""
    queryset = Orb.objects if queryset is None else queryset
    try:
        if revision:
            return orb_revision(orb_id=orb_id, revision=int(revision), queryset=queryset)
        return orb_current(orb_id=orb_id, queryset=queryset)
    except (Orb.DoesNotExist, ValueError):
        raise Http404(f"No Orb #{orb_id}" + (f" at revision {revision}" if revision else "")) from None


@require_GET
@role_required(*READERS)
def orb_provenance_page(request, orb_id: int):
    orb = _orb_or_404(request, orb_id, queryset=Orb.objects.select_related("bank"))
    return render(request, "orbs/provenance.html", orb_provenance(orb=orb))


@require_GET
@role_required(*READERS)
def orb_detail(request, orb_id: int):
    """The Orb's current revision; `?revision=N` shows an earlier one, read-only."""
    orb = _orb_or_404(request, orb_id, request.GET.get("revision"), queryset=Orb.objects.select_related(
        "bank", "reviewer", "episode", "supersedes", "near_duplicate_of", "merged_into"))
    context = {
        "orb": orb,
        "events": orb.events.select_related("actor"),
        "hits": RetrievalHit.objects.filter(orb=orb).select_related("retrieval")[:100],
        "chain": orb_revisions(orb=orb),
        "trajectory": orb.episode.trajectory if orb.episode else None,
        "can_review": has_role(request.user, Role.REVIEWER),
        "reject_form": RejectForm(initial={"expected_version": orb.version}),
        "merge_undos": _merge_undos(orb) if has_role(request.user, Role.REVIEWER) else [], "undo_days": UNDO_DAYS,
    }
    return render(request, "orbs/orb_detail.html", context)


def _merge_undos(orb: Orb) -> list:
    """The undos this Orb's page offers: of its own merge into another Orb, and of the merges into it
    (where a merge lands), newest first."""
    merged_in = Orb.objects.filter(merged_into=orb, status=Orb.Status.SUPERSEDED).select_related("bank")
    states = [merge_undo_state(orb=merged) for merged in [orb, *merged_in]]
    return sorted((state for state in states if state), key=lambda state: state.merge.at, reverse=True)


# --- review actions -------------------------------------------------------------------

def _first_error(form) -> str:
    field, errors = next(iter(form.errors.items()))
    label = form.fields[field].label or field.replace("_", " ") if field in form.fields else "form"
    return f"{label}: {errors[0]}"


def _next_url(request, fallback: str) -> str:
    target = request.POST.get("next") or request.GET.get("next")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return fallback


def _act(request, orb_id: int, form, action, done: str):
    """Run one review action; htmx gets the Orb's row back (409 with a message when stale),
    a plain form post is redirected with a flash message."""
    _orb_or_404(request, orb_id)
    error, status = "", 200
    if not form.is_valid():
        error, status = _first_error(form), 422
    else:
        try:
            action(form.cleaned_data)
        except OrbConflict as conflict:
            error, status = str(conflict), 409
        except OrbsError as refused:
            error, status = str(refused), 409
    orb = orb_current(orb_id=orb_id, queryset=Orb.objects.select_related("bank", "near_duplicate_of", "merged_into"))
    if request.htmx:
        context = {"orb": orb, "error": error, "notice": "" if error else done}
        return render(request, "orbs/_orb_row.html", context, status=status)
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"Orb #{orb.lineage_id}: {done}.")
    return redirect(_next_url(request, reverse("orbs:detail", args=[orb.lineage_id])))


@require_POST
@role_required(Role.REVIEWER)
def approve(request, orb_id: int):
    def act(data):
        orb_approve(orb_id=orb_id, expected_version=data["expected_version"], actor=request.user, note=data["note"])
    return _act(request, orb_id, ApproveForm(request.POST), act, "approved")


@require_POST
@role_required(Role.REVIEWER)
def reject(request, orb_id: int):
    def act(data):
        orb_reject(orb_id=orb_id, expected_version=data["expected_version"], actor=request.user, reason=data["reason"])
    return _act(request, orb_id, RejectForm(request.POST), act, "rejected")


@require_POST
@role_required(Role.REVIEWER)
def proposal_decide(request, proposal_id: int):
    """Accept (apply it to the Orb) or reject an agent's proposal; back to the queue with a message."""
    proposal = get_object_or_404(OrbProposal.objects.select_related("orb"), pk=proposal_id)
    form = ProposalDecisionForm(request.POST)
    if not form.is_valid():
        messages.error(request, _first_error(form))
        return redirect(_next_url(request, reverse("orbs:queue")))
    decide = proposal_accept if form.cleaned_data["decision"] == "accept" else proposal_reject
    try:
        decided = decide(proposal_id=proposal.pk, actor=request.user, note=form.cleaned_data["note"])
    except OrbsError as refused:
        messages.error(request, f"Proposal #{proposal.pk}: {refused}")
    else:
        messages.success(request, f"Proposal #{decided.pk} for Orb #{proposal.orb.lineage_id}: {decided.status}.")
    return redirect(_next_url(request, reverse("orbs:queue")))


@require_http_methods(["GET", "POST"])
@role_required(Role.REVIEWER)
def merge(request, orb_id: int):
    """Pick the Orb to keep among this one's nearest, shown side by side (GET); see both and confirm
    (POST); merge (POST with `confirm`), landing on the kept Orb, whose number the message names."""
    orb = _orb_or_404(request, orb_id, queryset=Orb.objects.select_related("bank"))
    form = MergeForm(request.POST or None, initial={"expected_version": orb.version, "into_id": request.GET.get("into")})
    context = {"orb": orb, "form": form, "candidates": merge_candidates(orb=orb)}
    if request.method == "GET":
        return render(request, "orbs/merge.html", context)
    if not form.is_valid():
        return render(request, "orbs/merge.html", {**context, "error": form.errors.get("into_id", ["check the form"])[0]},
                      status=422)
    try:
        target = _merge_target_shown(request, orb, form.cleaned_data["into_id"])
        if "confirm" not in request.POST:
            return render(request, "orbs/merge.html", {**context, "target": target})
        kept = orb_merge(orb_id=orb.pk, expected_version=form.cleaned_data["expected_version"], into_id=target.pk,
                         actor=request.user, note=form.cleaned_data["note"])
    except OrbsError as refused:
        return render(request, "orbs/merge.html", {**context, "error": str(refused)}, status=409)
    messages.success(request, f"Orb #{orb.lineage_id} merged into Orb #{kept.lineage_id}, which is kept; "
                              f"#{orb.lineage_id} stays readable, superseded. You can undo the merge below for "
                              f"{UNDO_DAYS} days.")
    return redirect("orbs:detail", kept.lineage_id)


def _merge_target_shown(request, orb: Orb, into_id: int) -> Orb:
    """The chosen Orb as the confirmation shows it: in this workspace and bank, not the Orb itself."""
    try:
        target = _orb_or_404(request, into_id, queryset=Orb.objects.select_related("bank"))
    except Http404:
        target = None
    if target is None or target.bank_id != orb.bank_id or target.lineage_id == orb.lineage_id:
        raise OrbsError(f"Orb #{into_id} cannot take this merge: choose another Orb of bank {orb.bank.name!r}")
    return target


def _group_or_404(request, orb_id: int):
    orb = _orb_or_404(request, orb_id, queryset=Orb.objects.select_related("bank"))
    group = duplicate_group_of(orb=orb)
    if group is None:
        raise Http404(f"Orb #{orb.lineage_id} is in no group of pending near-duplicates")
    return group


def _merge_from_group(request, group, form) -> tuple[Orb, int]:
    """Run the merge the form asks for: the kept Orb and how many were merged into it. OrbsError
    when it names an Orb outside the group (a ticked kept Orb is simply not merged into itself)."""
    members = {orb.pk for orb in group.orbs}
    keep = form.cleaned_data["keep"]
    others = [pair for pair in form.cleaned_data["merge"] if pair[0] != keep[0]]
    outside = sorted(orb_id for orb_id, _ in [keep, *others] if orb_id not in members)
    if outside:
        raise OrbsError(f"Orb #{outside[0]} is no longer a pending near-duplicate in this group; reload the page")
    kept = duplicates_merge(keep=keep, others=others, actor=request.user, note=form.cleaned_data["note"],
                            outcome=form.cleaned_data["outcome"])
    return kept, len(others)


@require_http_methods(["GET", "POST"])
@role_required(Role.REVIEWER)
def duplicates(request, orb_id: int):
    """A group of pending near-duplicates side by side, and the merge that keeps one of them."""
    group = _group_or_404(request, orb_id)
    form = DuplicateMergeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            kept, merged = _merge_from_group(request, group, form)
        except OrbsError as refused:
            form.add_error(None, str(refused))
        else:
            messages.success(request, f"Kept Orb #{kept.lineage_id}; {merged} near-duplicates merged into it.")
            return redirect("orbs:detail", kept.lineage_id)
    status = 422 if form.errors else 200
    return render(request, "orbs/duplicates.html", {"group": group, "form": form}, status=status)


def _edit_initial(orb: Orb) -> dict:
    """Approval is offered pre-ticked only where the Orb holds it already: editing a pending Orb must
    never approve it unless the reviewer chooses to."""
    return {"expected_version": orb.version, "obs": orb.obs, "emotion": orb.emotion, "outcome": orb.outcome,
            "context": orb.context, "approve": orb.status == Orb.Status.APPROVED}


def _edit_message(before: Orb, after: Orb) -> str:
    if after.revision == before.revision:
        return f"Orb #{after.lineage_id} updated (revision {after.revision}, same content id)."
    return f"Saved as revision {after.revision} of Orb #{after.lineage_id}; revision {before.revision} is kept in its history."


@require_http_methods(["GET", "POST"])
@role_required(Role.REVIEWER)
def edit(request, orb_id: int):
    orb = _orb_or_404(request, orb_id, queryset=Orb.objects.select_related("bank"))
    form = EditForm(request.POST or None, initial=_edit_initial(orb))
    if request.method == "POST" and form.is_valid():
        data = {**form.cleaned_data}
        try:
            edited = orb_edit(orb_id=orb.pk, actor=request.user, **data)
        except OrbsError as refused:
            form.add_error(None, str(refused))
        else:
            messages.success(request, _edit_message(orb, edited))
            return redirect("orbs:detail", edited.lineage_id)
    status = 422 if form.errors else 200
    return render(request, "orbs/orb_edit.html", {"orb": orb, "form": form}, status=status)


@require_POST
@role_required(Role.REVIEWER)
def bulk(request):
    """Decide the ticked Orbs, or every Orb the queue's filters (the address's query) match. Each
    shows a confirmation with the count and the banks first: the ticked Orbs are then decided at
    once (their versions, posted again, refuse any that changed meanwhile); every matching Orb by a
    job that decides exactly the Orbs it showed (orbs.services.bulk)."""
    form = BulkForm(request.POST)
    if not form.is_valid():
        messages.error(request, _first_error(form))
    elif form.for_all_matching:
        confirmation = _bulk_matching(request, form)
        if confirmation is not None:
            return confirmation
    else:
        for orb_id, _version in form.cleaned_data["selected"]:
            _orb_or_404(request, orb_id)
        if not form.cleaned_data["confirmed"]:
            return _bulk_ticked_confirmation(request, form)
        _bulk_decide(request, form, form.cleaned_data["selected"])
    if request.htmx:
        return render(request, "orbs/_queue_results.html", {**_queue_context(request), "flash": True})
    return redirect(f"{reverse('orbs:queue')}?{request.GET.urlencode()}")


def _bulk_ticked_confirmation(request, form) -> HttpResponse:
    """The question before a decision on the ticked Orbs: how many, of which banks."""
    items = form.cleaned_data["selected"]
    ids = [orb_id for orb_id, _version in items]
    banks = sorted(set(Orb.objects.filter(pk__in=ids).values_list("bank__name", flat=True)))
    context = {"action": form.cleaned_data["action"], "items": items, "banks": banks,
               "reason": form.cleaned_data["reason"], "query": request.GET.urlencode(),
               "confirmation": "orbs/_bulk_confirm_ticked.html"}
    return render(request, context["confirmation"] if request.htmx else "orbs/bulk_confirm.html", context)


def _bulk_decide(request, form, items: list[tuple[int, int]]) -> None:
    try:
        orbs = orbs_bulk_review(action=form.cleaned_data["action"], items=items, actor=request.user,
                                reason=form.cleaned_data["reason"])
        messages.success(request, f"{len(orbs)} Orbs {PAST_TENSE[form.cleaned_data['action']]}.")
    except OrbsError as refused:
        messages.error(request, f"Nothing was changed. {refused}")


def _bulk_matching(request, form) -> HttpResponse | None:
    """The confirmation page of a decision on every matching Orb, or, once confirmed, the job's page
    that makes it; None (the queue follows with its message) when it is refused."""
    filters = QueueFilterForm(request.GET, workspace=request.workspace)
    if filters.errors:
        messages.error(request, "Nothing was changed: the queue's filters were refused; set them again.")
        return None
    try:
        plan = bulk_plan(action=form.cleaned_data["action"], filters=filters.filters())
    except OrbsError as refused:
        messages.error(request, f"Nothing was changed: {refused}.")
        return None
    if not form.cleaned_data["fingerprint"]:
        context = {"plan": plan, "reason": form.cleaned_data["reason"], "query": request.GET.urlencode(),
                   "done": PAST_TENSE[plan.action], "confirmation": "orbs/_bulk_confirm.html"}
        return render(request, "orbs/_bulk_confirm.html" if request.htmx else "orbs/bulk_confirm.html", context)
    if form.cleaned_data["fingerprint"] != plan.fingerprint:
        messages.error(request, f"Nothing was changed: the matching Orbs changed after you confirmed (now "
                                f"{len(plan.items)} to {plan.action}); review the count again.")
        return None
    job = bulk_review_start(plan=plan, reason=form.cleaned_data["reason"], actor=request.user,
                            workspace=request.workspace, queue_query=request.GET.urlencode())
    job_url = reverse("job_detail", args=[job.pk])
    return HttpResponseClientRedirect(job_url) if request.htmx else redirect(job_url)


@require_POST
@role_required(Role.REVIEWER)
def merge_undo(request, orb_id: int):
    """Undo the merge of Orb `orb_id` into another; back to it with a message saying what it is again."""
    def act(data):
        orb_merge_undo(orb_id=orb_id, expected_version=data["expected_version"], actor=request.user, note=data["note"])
    return _act(request, orb_id, ApproveForm(request.POST), act, "merge undone, its decision from before the merge restored")


# --- banks -----------------------------------------------------------------------------

def _bank_rows(request, *, archived: bool = False) -> list[dict]:
    banks = MemoryBank.objects.filter(archived_at__isnull=not archived)
    return [{"bank": bank, "stats": bank_stats(bank=bank)} for bank in banks]


@require_GET
@role_required(*READERS)
def bank_list(request):
    """The banks in use; `?archived=1` the deleted (archived) ones."""
    archived = request.GET.get("archived") == "1"
    state = sort_state(request, BANK_SORTING)
    context = {"rows": rows_sorted(_bank_rows(request, archived=archived), sorting=BANK_SORTING, state=state),
               "sort": state, "archived": archived, "create_form": BankCreateForm(user=request.user), "import_form": ImportForm()}
    return render(request, "orbs/bank_list.html", context)


@require_POST
@role_required(Role.OPERATOR)
def bank_create(request):
    form = BankCreateForm(request.POST, user=request.user)
    if not form.is_valid():
        context = {"rows": _bank_rows(request), "create_form": form, "import_form": ImportForm()}
        return render(request, "orbs/bank_list.html", context, status=422)
    bank = bank_get_or_create(workspace=request.workspace, **form.cleaned_data)
    messages.success(request, f"Memory bank “{bank.name}” created.")
    return redirect("orbs:bank_detail", bank.slug)


@require_POST
@role_required(Role.OPERATOR)
def bank_import_page(request):
    """The file is checked now (problems are listed by line); a worker writes it (the job's page)."""
    form = ImportForm(request.POST, request.FILES)
    report = None
    if form.is_valid():
        report, job = bank_import_start(upload=form.cleaned_data["file"],
                                        name=form.cleaned_data["name"].strip() or None, user=request.user,
                                        workspace=request.workspace)
        if job is not None:
            return redirect("job_detail", job.pk)
    context = {"rows": _bank_rows(request), "create_form": BankCreateForm(user=request.user), "import_form": form,
               "report": report}
    return render(request, "orbs/bank_list.html", context, status=422)


def _bank_page(request, bank: MemoryBank, form, status: int = 200, copy_form=None):
    context = {
        "bank": bank, "stats": bank_stats(bank=bank), "form": form, "budget_cut": bank_budget_cut(bank=bank),
        "can_edit": has_role(request.user, Role.OPERATOR), "can_set_policy": has_role(request.user, *READERS),
        "copy_form": copy_form or BankCopyForm(),
        "retrievals": RetrievalLog.objects.filter(bank=bank)[:20],
        "failed": bank.episodes.filter(status="failed")[:20],
        "delete_form": BankDeleteForm(bank=bank), "erasure_form": ErasureForm(), "events": bank_events(bank=bank)[:20],
        "history": history_status(bank=bank),
    }
    return render(request, "orbs/bank_detail.html", context, status=status)


@require_GET
@role_required(*READERS)
def bank_detail(request, slug: str):
    bank = get_object_or_404(MemoryBank, slug=slug)
    return _bank_page(request, bank, BankPolicyForm(instance=bank, user=request.user))


@require_POST
@role_required(Role.OPERATOR, Role.REVIEWER)
def bank_policy(request, slug: str):
    """Operators set retrieval, reviewers the approval policy (the form disables the other's fields)."""
    bank = get_object_or_404(MemoryBank, slug=slug)
    form = BankPolicyForm(request.POST, instance=MemoryBank.objects.get(pk=bank.pk), user=request.user)
    if not form.is_valid():
        return _bank_page(request, bank, form, status=422)
    bank_policy_update(bank=bank, **{field: form.cleaned_data[field] for field in SETTABLE_FIELDS})
    messages.success(request, "Policy saved.")
    return redirect("orbs:bank_detail", bank.slug)


@require_POST
@role_required(Role.OPERATOR)
def bank_copy_page(request, slug: str):
    """A worker copies the bank; the job's page follows it."""
    bank = get_object_or_404(MemoryBank, slug=slug)
    form = BankCopyForm(request.POST)
    if form.is_valid():
        try:
            return redirect("job_detail", bank_copy_start(source=bank, name=form.cleaned_data["name"],
                                                          user=request.user).pk)
        except OrbsError as refused:
            form.add_error("name", str(refused).partition(": ")[2] or str(refused))
    return _bank_page(request, bank, BankPolicyForm(instance=bank, user=request.user), status=422, copy_form=form)


@require_POST
@role_required(*READERS)
def bank_history_verify(request, slug: str):
    """A worker walks the bank's hash chain (its size is unbounded); the job's page follows it."""
    bank = get_object_or_404(MemoryBank, slug=slug)
    return redirect("job_detail", history_verify_start(bank=bank, user=request.user).pk)


@require_GET
@role_required(*READERS)
def bank_export_download(request, slug: str):
    bank = get_object_or_404(MemoryBank, slug=slug)
    response = StreamingHttpResponse(bank_export(bank=bank), content_type="application/x-ndjson")
    return attachment(response, filename=f"{bank.slug}.jsonl")


# --- deletion and erasure -------------------------------------------------------------

@require_POST
@role_required(Role.REVIEWER)
def delete(request, orb_id: int):
    def act(data):
        orb_delete(orb_id=orb_id, expected_version=data["expected_version"], actor=request.user,
                   reason=data["reason"])
    return _act(request, orb_id, DeleteForm(request.POST), act, "deleted (no longer served)")


@require_POST
@role_required(Role.REVIEWER)
def restore(request, orb_id: int):
    def act(data):
        orb_restore(orb_id=orb_id, expected_version=data["expected_version"], actor=request.user,
                    note=data["note"])
    return _act(request, orb_id, RestoreForm(request.POST), act, "restored")


def _refuse_on_bank_page(request, bank: MemoryBank, form) -> HttpResponse:
    messages.error(request, _first_error(form))
    return _bank_page(request, bank, BankPolicyForm(instance=bank, user=request.user), status=422)


@require_POST
@role_required(Role.OPERATOR)
def bank_delete(request, slug: str):
    bank = get_object_or_404(MemoryBank, slug=slug)
    form = BankDeleteForm(request.POST, bank=bank)
    if not form.is_valid():
        return _refuse_on_bank_page(request, bank, form)
    bank_archive(bank=bank, actor=request.user, reason=form.cleaned_data["reason"])
    messages.success(request, f"Memory bank “{bank.name}” deleted (archived): it serves no retrievals; "
                              "restore it from its page.")
    return redirect("orbs:bank_detail", bank.slug)


@require_POST
@role_required(Role.OPERATOR)
def bank_restore_page(request, slug: str):
    bank = bank_restore(bank=get_object_or_404(MemoryBank, slug=slug), actor=request.user)
    messages.success(request, f"Memory bank “{bank.name}” restored.")
    return redirect("orbs:bank_detail", bank.slug)


@require_POST
@role_required(Role.OPERATOR)
def customer_erase_page(request, slug: str):
    """The erasure runs as a job whose page follows it; neither names the customer."""
    bank = get_object_or_404(MemoryBank, slug=slug)
    form = ErasureForm(request.POST)
    if not form.is_valid():
        return _refuse_on_bank_page(request, bank, form)
    data = form.cleaned_data
    job = customer_erasure_start(bank=bank, customer_key=data["customer_key"], actor=request.user,
                                 reason=data["reason"], every_bank=data["every_bank"])
    return redirect("job_detail", job.pk)


# --- one customer's timeline ---------------------------------------------------------------

TIMELINE_PAGE_SIZE = 25


def _timeline_context(request, lookup, erasure_form=None) -> dict:
    """The lookup form and, once it names a customer, their counts, one page of rows and the erase form."""
    context = {"lookup": lookup, "can_erase": has_role(request.user, Role.OPERATOR)}
    if not lookup.is_bound or not lookup.is_valid():
        return context
    key = lookup.cleaned_data["customer_key"]
    timeline = customer_timeline(workspace=request.workspace, customer_key=key)
    page = CappedPaginator(timeline.rows, TIMELINE_PAGE_SIZE).get_page(lookup.cleaned_data["page"])
    erasure_form = erasure_form or CustomerErasureForm(initial={"customer_key": key})
    return {**context, "customer_key": key, "timeline": timeline, "page": page, "erasure_form": erasure_form,
            "entries": timeline_objects(workspace=request.workspace, customer_key=key, entries=list(page.object_list))}


@require_http_methods(["GET", "POST"])
@role_required(*READERS)
def customer_timeline_page(request):
    """Everything held on one customer, newest first. The key is posted (a search form, and pages as
    buttons), never in the address, so it stays out of access logs as an erasure's does."""
    lookup = CustomerLookupForm(request.POST if request.method == "POST" else None)
    status = 422 if lookup.is_bound and not lookup.is_valid() else 200
    return render(request, "orbs/customer_timeline.html", _timeline_context(request, lookup), status=status)


@require_POST
@role_required(Role.OPERATOR)
def customer_timeline_erase(request):
    """Erase the customer the timeline shows from every bank of the workspace holding them, by the
    erasure job (the job's page follows it). Refused at the field when the key typed again differs."""
    form = CustomerErasureForm(request.POST)
    lookup = CustomerLookupForm({"customer-customer_key": request.POST.get("erase-customer_key", "")})
    if not form.is_valid():
        return render(request, "orbs/customer_timeline.html", _timeline_context(request, lookup, form), status=422)
    key = form.cleaned_data["customer_key"].strip()
    first = banks_holding_customer(customer_key=key, workspace_id=request.workspace.pk).first()
    if first is None:
        messages.info(request, "memweb holds nothing on this customer: nothing was erased.")
        return render(request, "orbs/customer_timeline.html", _timeline_context(request, lookup), status=409)
    job = customer_erasure_start(bank=first, customer_key=key, actor=request.user,
                                 reason=form.cleaned_data["reason"], every_bank=True)
    return redirect("job_detail", job.pk)
