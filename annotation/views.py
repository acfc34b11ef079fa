"""Annotation pages. Operators manage campaigns and read results; annotators
write feedback and judge blind pairs, addressed only by opaque tokens."""
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.db.models import Count
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation import services
from annotation.forms import (
    SCORE_CHOICES,
    CampaignFilterForm,
    CampaignForm,
    CampaignImportForm,
    ItemEditForm,
    UploadForm,
)
from annotation.models import Adjudication, Assignment, Campaign, FeedbackTask, Flag, Item, Reaction
from annotation.services.intake import FIELDS, MAX_UPLOAD_BYTES, REQUIRED, ImportReport, RowProblem
from memweb.downloads import attachment
from memweb.jsonl import upload_text
from memweb.listing import Sorting, list_page, page_of, sorted_page
from memweb.registry import study_sources
from memweb.roles import Role, has_role, role_required

PAGE_SIZE = 20
CAMPAIGN_SORTING = Sorting(columns={"campaign": "name", "status": "status", "items": "item_count",
                                    "annotators": "annotators_per_item", "deadline": "deadline", "created": "created_at"})
ITEM_SORTING = Sorting(columns={"id": "pk", "source": "source_ref", "language": "language", "format": "task_format",
                                "domain": "domain", "judgments": "judged"})


@require_GET
@role_required(Role.OPERATOR, Role.ANNOTATOR)
def index(request):
    if has_role(request.user, Role.OPERATOR):
        return redirect("annotation:campaign_list")
    return redirect("annotation:queue")


# --- operators: campaigns ---
@require_GET
@role_required(Role.OPERATOR)
def campaign_list(request):
    form = CampaignFilterForm(request.GET or None)
    campaigns = Campaign.objects.annotate(item_count=Count("items"))
    campaigns = campaigns.order_by("-created_at", "-pk")
    if form.is_valid():
        if form.cleaned_data["q"]:
            campaigns = campaigns.filter(name__icontains=form.cleaned_data["q"])
        if form.cleaned_data["status"]:
            campaigns = campaigns.filter(status=form.cleaned_data["status"])
    return list_page(request, rows=campaigns, template="annotation/campaign_list.html",
                     partial="annotation/_campaign_rows.html", per_page=PAGE_SIZE, sorting=CAMPAIGN_SORTING,
                     context={"form": form, "import_form": CampaignImportForm(), "study_sources": study_sources()})


@require_http_methods(["GET", "POST"])
@role_required(Role.OPERATOR)
def campaign_create(request):
    form = CampaignForm(request.POST or None, instance=Campaign(created_by=request.user, workspace=request.workspace))
    if request.method == "POST" and form.is_valid():
        campaign = form.save()
        messages.success(request, f"Campaign “{campaign.name}” created as a draft. Add items, then open it.")
        return redirect("annotation:campaign_detail", pk=campaign.pk)
    return render(request, "annotation/campaign_form.html", {"form": form}, status=400 if form.errors else 200)


@require_http_methods(["GET", "POST"])
@role_required(Role.OPERATOR)
def campaign_edit(request, pk: int):
    campaign = get_object_or_404(Campaign, pk=pk)
    form = CampaignForm(request.POST or None, instance=campaign)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, "Campaign saved.")
        return redirect("annotation:campaign_detail", pk=campaign.pk)
    context = {"form": form, "campaign": campaign}
    return render(request, "annotation/campaign_form.html", context, status=400 if form.errors else 200)


@require_GET
@role_required(Role.OPERATOR)
def campaign_detail(request, pk: int):
    campaign = get_object_or_404(Campaign, pk=pk)
    context = _detail_context(request, campaign)
    if request.htmx:
        return render(request, "annotation/_items.html", context)
    return render(request, "annotation/campaign_detail.html", context)


ITEM_FILTERS = ("q", "language", "task_format", "domain", "stage")


def _detail_context(request, campaign: Campaign, **extra) -> dict:
    # PostgreSQL text holds no NUL: left in, a NUL in a filter made the page a 500.
    filters = {name: request.GET.get(name, "").replace("\x00", "").strip() for name in ITEM_FILTERS}
    items = services.items_browse(campaign=campaign, **filters)
    return {
        **_progress_context(campaign),
        **sorted_page(request, items, sorting=ITEM_SORTING, per_page=PAGE_SIZE), "filters": filters,
        "stages": services.STAGES, "facets": services.item_facets(campaign=campaign),
        "upload_form": UploadForm(), "fields": FIELDS, "required": REQUIRED, "study_sources": study_sources(),
        "flagged_ids": services.flagged_item_ids(campaign=campaign),
        **_roster_context(campaign), **_flags_context(campaign), **extra,
    }


def _roster_context(campaign: Campaign) -> dict:
    return {"roster": services.roster_members(campaign=campaign),
            "roster_candidates": services.roster_candidates(campaign=campaign),
            "workspace_annotator_count": services.workspace_annotators(campaign=campaign).count()}


def _flags_context(campaign: Campaign) -> dict:
    flags = list(services.flags_open(campaign=campaign))
    return {"flags": [{"flag": flag, "locked": services.item_lock_reason(item=flag.item)} for flag in flags],
            "skips": services.skips_count(campaign=campaign)}


def _progress_context(campaign: Campaign) -> dict:
    return {"campaign": campaign, "progress": services.campaign_progress(campaign=campaign),
            "shortfall": services.campaign_shortfall(campaign=campaign)}


@require_GET
@role_required(Role.OPERATOR)
def campaign_progress(request, pk: int):
    """Polled by the detail page while the campaign is open."""
    campaign = get_object_or_404(Campaign, pk=pk)
    return render(request, "annotation/_progress.html", _progress_context(campaign))


@require_POST
@role_required(Role.OPERATOR)
def campaign_status(request, pk: int):
    """Closing always asks first; opening asks first when the pool cannot finish the campaign."""
    campaign = get_object_or_404(Campaign, pk=pk)
    status = request.POST.get("status", "")
    if not request.POST.get("confirmed") and _needs_confirmation(campaign, status):
        return render(request, "annotation/status_confirm.html", {**_progress_context(campaign), "status": status})
    try:
        services.campaign_status_change(campaign=campaign, status=status)
    except services.CampaignStateError as error:
        messages.error(request, f"Status: {error}")
    else:
        messages.success(request, f"The campaign is now {campaign.get_status_display().lower()}.")
    return redirect("annotation:campaign_detail", pk=campaign.pk)


def _needs_confirmation(campaign: Campaign, status: str) -> bool:
    if status == Campaign.Status.CLOSED:
        return campaign.status == Campaign.Status.OPEN
    return (status == Campaign.Status.OPEN and campaign.status != Campaign.Status.OPEN
            and campaign.items.exists() and bool(services.campaign_shortfall(campaign=campaign)))


@require_http_methods(["GET", "POST"])
@role_required(Role.OPERATOR)
def item_edit(request, pk: int, item_id: int):
    item = get_object_or_404(Item, pk=item_id, campaign_id=pk)
    reason = services.item_lock_reason(item=item)
    if reason:
        messages.error(request, f"Not editable: {reason}.")
        return redirect("annotation:campaign_detail", pk=pk)
    form = ItemEditForm(request.POST or None, initial={name: getattr(item, name) for name in services.EDITABLE})
    if request.method == "POST" and form.is_valid():
        try:
            problems = services.item_update(item=item, values=form.cleaned_data)
        except services.ItemLocked as locked:
            messages.error(request, f"Not saved: {locked}.")
            return redirect("annotation:campaign_detail", pk=pk)
        for name, problem in problems.items():
            form.add_error(name if name in form.fields else None, problem)
        if not problems:
            messages.success(request, f"Item #{item.pk} saved.")
            return redirect("annotation:campaign_detail", pk=pk)
    context = {"campaign": item.campaign, "item": item, "form": form}
    return render(request, "annotation/item_edit.html", context, status=400 if form.errors else 200)


@require_POST
@role_required(Role.OPERATOR)
def item_withdraw(request, pk: int, item_id: int):
    item = get_object_or_404(Item, pk=item_id, campaign_id=pk)
    try:
        services.item_withdraw(item=item)
    except services.ItemLocked as locked:
        messages.error(request, f"Not withdrawn: {locked}.")
    else:
        messages.success(request, f"Item #{item_id} withdrawn from the campaign.")
    back = request.POST.get("back", "")  # the list's filters and page, kept across the withdrawal
    return redirect(reverse("annotation:campaign_detail", args=[pk]) + (f"?{back}" if back else ""))


@require_GET
@role_required(Role.OPERATOR)
def campaign_disagreements(request, pk: int):
    campaign = get_object_or_404(Campaign, pk=pk)
    return render(request, "annotation/disagreements.html", _disagreements_context(request, campaign))


def _disagreements_context(request, campaign: Campaign, failed: dict | None = None) -> dict:
    rows = services.disagreements_adjudicated(campaign=campaign)
    if failed:
        _refusal_attach(rows, failed)
    return {"campaign": campaign, "page": page_of(request, rows, per_page=PAGE_SIZE), "query": "",
            "final_choices": Adjudication.Label.choices, "error": failed and failed["error"],
            "error_item": failed and failed["item_id"]}


def _refusal_attach(rows: list[dict], failed: dict) -> None:
    """Put a refused adjudication's values and problem back on its item's form."""
    error = failed["error"]
    for row in rows:
        if row["item_id"] != failed["item_id"]:
            continue
        row["failed"] = {"field": error.field, "reason": error.reason, "note": failed["note"]}
        for criterion in row["criteria"]:
            criterion["posted"] = failed["labels"].get(criterion["key"], "")
            criterion["error"] = error.reason if error.field == criterion["key"] else ""


@require_POST
@role_required(Role.OPERATOR)
def item_adjudicate(request, pk: int, item_id: int):
    """The lead's final label per criterion of a disputed item, with a note."""
    item = get_object_or_404(Item.objects.select_related("campaign"), pk=item_id, campaign_id=pk)
    labels = {key: request.POST.get(f"final_{key}", "") for key in item.campaign.criterion_keys}
    note = request.POST.get("note", "")
    try:
        decided = services.adjudicate(item=item, labels=labels, note=note, decided_by=request.user)
    except services.AdjudicationError as error:
        failed = {"item_id": item.pk, "labels": labels, "note": note, "error": error}
        context = _disagreements_context(request, item.campaign, failed=failed)
        return render(request, "annotation/disagreements.html", context, status=400)
    messages.success(request, f"Item #{item.pk}: final label set for {len(decided)} "
                              f"criteri{'on' if len(decided) == 1 else 'a'}.")
    page = request.GET.get("page", "")
    query = f"?page={page}" if page.isdigit() else ""
    return redirect(reverse("annotation:campaign_disagreements", args=[pk]) + query + f"#split-{item.pk}")


@require_GET
@role_required(Role.OPERATOR)
def campaign_throughput(request, pk: int):
    campaign = get_object_or_404(Campaign, pk=pk)
    throughput = services.annotator_throughput(campaign=campaign)
    return render(request, "annotation/throughput.html", {"campaign": campaign, "throughput": throughput})


@require_POST
@role_required(Role.OPERATOR)
def campaign_upload(request, pk: int):
    """All-or-nothing: any bad row stores nothing and the report lists every problem."""
    campaign = get_object_or_404(Campaign, pk=pk)
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _upload_answer(request, campaign, form, None, status=400)
    upload = form.cleaned_data["file"]
    records, problems = services.upload_read(upload=upload)
    report = services.items_import(campaign=campaign, records=records, problems=problems)
    if report.ok and not request.htmx:
        messages.success(request, f"Imported {report.created} items ({report.needs_feedback} need human feedback).")
        return redirect("annotation:campaign_detail", pk=campaign.pk)
    return _upload_answer(request, campaign, form, report, status=200 if report.ok else 400)


def _upload_answer(request, campaign, form, report, *, status: int):
    if request.htmx:
        return render(request, "annotation/_upload_report.html", {"report": report, "upload_form": form,
                                                                  "campaign": campaign}, status=status)
    context = _detail_context(request, campaign, upload_form=form, report=report)
    return render(request, "annotation/campaign_detail.html", context, status=status)


def _campaign_file_import(form, workspace):
    text, problem = upload_text(form.cleaned_data["file"], max_bytes=MAX_UPLOAD_BYTES)
    if problem:
        return ImportReport(problems=[RowProblem(problem.line, problem.field, problem.reason)]), None
    return services.campaign_import(text=text, name=form.cleaned_data["name"].strip(), workspace=workspace)


@require_POST
@role_required(Role.OPERATOR)
def campaign_import(request):
    """A campaign file exported from memweb, re-created whole or not at all."""
    form = CampaignImportForm(request.POST, request.FILES)
    report = None
    if form.is_valid():
        report, campaign = _campaign_file_import(form, request.workspace)
        if campaign is not None:
            messages.success(request, f"Imported “{campaign.name}” ({report.created} records).")
            return redirect("annotation:campaign_detail", pk=campaign.pk)
    context = {"form": CampaignFilterForm(), "page": page_of(request, Campaign.objects.none()),
               "query": "", "import_form": form, "import_report": report}
    return render(request, "annotation/campaign_list.html", context, status=400)


@require_GET
@role_required(Role.OPERATOR)
def campaign_results(request, pk: int):
    campaign = get_object_or_404(Campaign, pk=pk)
    results = services.campaign_results(campaign=campaign)
    return render(request, "annotation/results.html", {
        "campaign": campaign, "results": results, "chart_data": _chart_data(results),
        "adjudication": services.adjudication_summary(campaign=campaign)})


@require_POST
@role_required(Role.OPERATOR)
def participant_standing(request, pk: int, annotator_id: int):
    """The exclusion toggle: exclude, reinstate, or back to the attention-check rule."""
    campaign = get_object_or_404(Campaign, pk=pk)
    if not Assignment.objects.filter(campaign=campaign, annotator_id=annotator_id).exists():
        raise Http404("no such annotator in this campaign")
    annotator = get_object_or_404(get_user_model(), pk=annotator_id)
    decision = request.POST.get("decision", "")
    if decision not in services.OPERATOR_DECISIONS:
        return HttpResponse(f"decision must be one of {', '.join(services.OPERATOR_DECISIONS)}", status=400)
    services.participant_decide(campaign=campaign, annotator=annotator, decision=decision)
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Refresh"] = "true"  # every figure changes with who is counted
        return response
    return redirect("annotation:campaign_results", pk=campaign.pk)


@require_POST
@role_required(Role.OPERATOR)
def roster_add(request, pk: int):
    campaign = get_object_or_404(Campaign, pk=pk)
    try:
        member = services.roster_add(campaign=campaign, annotator_id=request.POST.get("annotator", ""),
                                     added_by=request.user)
    except services.RosterError as error:
        messages.error(request, f"Roster: {error}.")
    else:
        messages.success(request, f"{member.annotator.username} may now work on this campaign.")
    return redirect(reverse("annotation:campaign_detail", args=[pk]) + "#roster")


@require_POST
@role_required(Role.OPERATOR)
def roster_remove(request, pk: int, annotator_id: int):
    campaign = get_object_or_404(Campaign, pk=pk)
    try:
        released = services.roster_remove(campaign=campaign, annotator_id=annotator_id)
    except services.RosterError as error:
        messages.error(request, f"Roster: {error}.")
    else:
        messages.success(request, f"Removed from the roster; {released} unfinished item{'s' if released != 1 else ''} "
                                  "went back to the others.")
    return redirect(reverse("annotation:campaign_detail", args=[pk]) + "#roster")


@require_POST
@role_required(Role.OPERATOR)
def item_flags_clear(request, pk: int, item_id: int):
    """The lead keeps a flagged item: its flags are cleared and it goes back to the annotators."""
    item = get_object_or_404(Item, pk=item_id, campaign_id=pk)
    cleared = services.flags_clear(item=item, cleared_by=request.user)
    if cleared:
        messages.success(request, f"Item #{item.pk}: flag cleared; it goes back to the annotators.")
    else:
        messages.info(request, f"Item #{item.pk} had no open flag.")
    return redirect(reverse("annotation:campaign_detail", args=[pk]) + "#flags")


def _chart_data(results: dict) -> dict:
    overall = results["overall"]
    return {
        "criteria": [stats["label"] for stats in overall],
        "simulated": [stats["win"]["simulated"] for stats in overall],
        "human": [stats["win"]["human"] for stats in overall],
        "ties": [stats["win"]["ties"] for stats in overall],
        "kappa": [stats["kappa"] for stats in overall],
        "fidelity": {"reliability": results["fidelity"]["reliability"],
                     "ceiling": results["fidelity"]["reliability_ceiling"]},
        "breakdowns": [
            {"label": breakdown["label"], "groups": [group["group"] for group in breakdown["groups"]],
             "series": [{"criterion": stats["label"], "values": [
                 group["criteria"][index]["win"]["simulated_vs_human"] for group in breakdown["groups"]]}
                 for index, stats in enumerate(overall)]}
            for breakdown in results["breakdowns"]
        ],
    }


@require_GET
@role_required(Role.OPERATOR)
def campaign_export(request, pk: int, kind: str, fmt: str):
    campaign = get_object_or_404(Campaign, pk=pk)
    builders = {"judgments": services.judgment_records, "results": services.result_records,
                "labels": services.final_label_records}
    if (kind not in builders or fmt not in ("csv", "jsonl")) and (kind, fmt) != ("campaign", "jsonl"):
        raise Http404("unknown export")
    content_type = "text/csv" if fmt == "csv" else "application/x-ndjson"
    content = (services.campaign_export_render(campaign=campaign) if kind == "campaign"
               else services.records_render(builders[kind](campaign=campaign), fmt))
    response = HttpResponse(content, content_type=f"{content_type}; charset=utf-8")
    return attachment(response, filename=f"campaign-{campaign.pk}-{kind}.{fmt}")


# --- annotators ---
@require_GET
@role_required(Role.ANNOTATOR)
def queue(request):
    campaigns = Campaign.objects.filter(status=Campaign.Status.OPEN).order_by("name")
    rows = [_queue_row(campaign, request.user) for campaign in campaigns if campaign.is_accepting_work()
            and services.annotator_allowed(campaign=campaign, annotator=request.user)]
    return render(request, "annotation/queue.html", {"rows": rows})


def _queue_row(campaign: Campaign, user) -> dict:
    services.assignments_reclaim(campaign=campaign)
    services.feedback_tasks_reclaim(campaign=campaign)
    return {
        "campaign": campaign,
        "active": services.assignment_active(campaign=campaign, annotator=user),
        "available": services.items_available(campaign=campaign, annotator=user).count(),
        "judged": Assignment.objects.filter(campaign=campaign, annotator=user,
                                            status=Assignment.Status.COMPLETED).count(),
        "writing": services.feedback_task_active(campaign=campaign, writer=user),
        "to_write": services.feedback_tasks_open_for(campaign=campaign, writer=user).count(),
        "written": FeedbackTask.objects.filter(campaign=campaign, writer=user,
                                               status=FeedbackTask.Status.DONE).count(),
        "standing": getattr(services.participant_standing(campaign=campaign, annotator=user), "standing", ""),
    }


@require_POST
@role_required(Role.ANNOTATOR)
def judge_next(request, pk: int):
    return _judge_next_redirect(request, get_object_or_404(Campaign, pk=pk))


def _judge_next_redirect(request, campaign: Campaign):
    assignment = services.assignment_next(campaign=campaign, annotator=request.user)
    if assignment is None:
        messages.info(request, f"Nothing is waiting for you to judge in “{campaign.name}”. Thank you!")
        return redirect("annotation:queue")
    return redirect("annotation:judge", token=assignment.token)


@require_http_methods(["GET", "POST"])
@role_required(Role.ANNOTATOR)
def judge(request, token):
    assignment = get_object_or_404(Assignment.objects.select_related("item", "campaign"), token=token,
                                   annotator=request.user)
    if request.method == "GET":
        services.assignment_open(assignment=assignment)
        return render(request, "annotation/judge.html", _judge_context(assignment, request.user))
    choices = {key: request.POST.get(f"criterion_{key}", "") for key in assignment.campaign.criterion_keys}
    try:
        services.judgment_submit(token=assignment.token, annotator=request.user, choices=choices,
                                 comment=request.POST.get("comment", ""),
                                 time_spent_ms=request.POST.get("time_spent_ms", 0),
                                 score=request.POST.get("score", ""), action=request.POST.get("action", ""))
    except services.SubmitError as error:
        context = _judge_context(assignment, request.user, error=error, posted=choices,
                                 comment=request.POST.get("comment", ""), rating=_posted_rating(request))
        return render(request, "annotation/judge.html", context, status=400)
    return _judge_next_redirect(request, assignment.campaign)


def _judge_context(assignment: Assignment, user, **extra) -> dict:
    """Only side-labelled data goes to the template; which side is human stays here."""
    campaign = assignment.campaign
    judgment = getattr(assignment, "judgment", None)
    chosen = extra.pop("posted", None) or (judgment.choices if judgment else {})
    criteria = [{**criterion, "chosen": chosen.get(criterion["key"], "")} for criterion in campaign.criteria]
    done = Assignment.objects.filter(campaign=campaign, annotator=user, status=Assignment.Status.COMPLETED).count()
    position, total = services.judging_position(assignment=assignment, annotator=user)
    return {
        "position": position, "total": total, "flag_reasons": Flag.Reason.choices,
        "in_hand": assignment.status == Assignment.Status.ASSIGNED, "triage": extra.pop("triage", {}),
        "token": assignment.token, "campaign": campaign, "item": _context_of(assignment.item),
        "feedback_a": assignment.feedback_for_side("A"), "feedback_b": assignment.feedback_for_side("B"),
        "criteria": criteria, "options": services.side_options(campaign), "judged": judgment is not None,
        "done": done, "remaining": services.items_available(campaign=campaign, annotator=user).count(),
        "comment": judgment.comment if judgment else "", "score_choices": SCORE_CHOICES,
        "reactions": Reaction.choices, "rating": _rating_of(judgment, extra.pop("rating", None)), **extra,
    }


def _rating_of(judgment, posted: dict | None) -> dict:
    if posted is not None:
        return posted
    return {"score": str(judgment.score or ""), "action": judgment.action} if judgment else {"score": "", "action": ""}


def _context_of(item) -> dict:
    """The conversation context shown to annotators (no ids, no sources)."""
    return {"conversation": item.conversation, "task_description": item.task_description,
            "evaluation_context": item.evaluation_context}


@require_POST
@role_required(Role.ANNOTATOR)
def judge_skip(request, token):
    """Pass on this item: it goes to another annotator, and the next one comes to you."""
    assignment = _assignment_of(request, token)
    try:
        services.assignment_skip(token=token, annotator=request.user, reason=request.POST.get("skip_reason", ""))
    except services.SubmitError as error:
        return _judge_triage_refused(request, assignment, error)
    messages.info(request, "Item skipped; it goes to another annotator.")
    return _judge_next_redirect(request, assignment.campaign)


@require_POST
@role_required(Role.ANNOTATOR)
def judge_flag(request, token):
    """Report this item to the campaign's lead; nobody is given it until the lead decides."""
    assignment = _assignment_of(request, token)
    try:
        services.assignment_flag(token=token, annotator=request.user, reason=request.POST.get("flag_reason", ""),
                                 note=request.POST.get("flag_note", ""))
    except services.SubmitError as error:
        return _judge_triage_refused(request, assignment, error)
    messages.info(request, "Item flagged for the campaign's lead. Thank you!")
    return _judge_next_redirect(request, assignment.campaign)


def _assignment_of(request, token) -> Assignment:
    return get_object_or_404(Assignment.objects.select_related("item", "campaign"), token=token,
                             annotator=request.user)


def _judge_triage_refused(request, assignment: Assignment, error):
    assignment.refresh_from_db()
    context = _judge_context(assignment, request.user, triage=_posted_triage(request), **_triage_errors(error))
    return render(request, "annotation/judge.html", context, status=400)


TRIAGE_FIELDS = ("skip_reason", "flag_reason", "flag_note")


def _posted_triage(request) -> dict:
    return {name: request.POST.get(name, "") for name in TRIAGE_FIELDS}


def _triage_errors(error) -> dict:
    """A problem with a skip or flag field shows at that field; any other (the item is no longer
    theirs) above the page's form."""
    return {"triage_error": error} if error.field in TRIAGE_FIELDS else {"error": error}


@require_POST
@role_required(Role.ANNOTATOR)
def write_skip(request, token):
    task = _task_of(request, token)
    try:
        services.feedback_task_skip(token=token, writer=request.user, reason=request.POST.get("skip_reason", ""))
    except services.SubmitError as error:
        return _write_triage_refused(request, task, error)
    messages.info(request, "Conversation skipped; it goes to another annotator.")
    return _write_next_redirect(request, task.campaign)


@require_POST
@role_required(Role.ANNOTATOR)
def write_flag(request, token):
    task = _task_of(request, token)
    try:
        services.feedback_task_flag(token=token, writer=request.user, reason=request.POST.get("flag_reason", ""),
                                    note=request.POST.get("flag_note", ""))
    except services.SubmitError as error:
        return _write_triage_refused(request, task, error)
    messages.info(request, "Conversation flagged for the campaign's lead. Thank you!")
    return _write_next_redirect(request, task.campaign)


def _task_of(request, token) -> FeedbackTask:
    task = get_object_or_404(FeedbackTask.objects.select_related("item", "campaign"), token=token)
    if task.writer_id not in (None, request.user.pk):
        raise Http404("not your task")
    return task


def _write_triage_refused(request, task: FeedbackTask, error):
    task.refresh_from_db()
    context = _write_context(task, request.user) | {"triage": _posted_triage(request), **_triage_errors(error)}
    return render(request, "annotation/write.html", context, status=400)


@require_POST
@role_required(Role.ANNOTATOR)
def write_next(request, pk: int):
    return _write_next_redirect(request, get_object_or_404(Campaign, pk=pk))


def _write_next_redirect(request, campaign: Campaign):
    task = services.feedback_task_next(campaign=campaign, writer=request.user)
    if task is None:
        messages.info(request, f"No conversation in “{campaign.name}” needs feedback right now.")
        return redirect("annotation:queue")
    return redirect("annotation:write", token=task.token)


@require_http_methods(["GET", "POST"])
@role_required(Role.ANNOTATOR)
def write(request, token):
    task = _task_of(request, token)
    context = _write_context(task, request.user)
    if request.method == "GET":
        return render(request, "annotation/write.html", context)
    text = request.POST.get("text", "")
    try:
        services.feedback_task_submit(token=task.token, writer=request.user, text=text,
                                      time_spent_ms=request.POST.get("time_spent_ms", 0),
                                      score=request.POST.get("score", ""), action=request.POST.get("action", ""),
                                      rating_required=True)
    except services.SubmitError as error:
        context |= {"error": error, "text": text, "rating": _posted_rating(request)}
        return render(request, "annotation/write.html", context, status=400)
    messages.success(request, "Feedback saved. Thank you!")
    return _write_next_redirect(request, task.campaign)


def _write_context(task: FeedbackTask, user) -> dict:
    position, total = services.writing_position(task=task, writer=user)
    return {"task": task, "campaign": task.campaign, "item": _context_of(task.item), "reactions": Reaction.choices,
            "score_choices": SCORE_CHOICES, "rating": {"score": str(task.score or ""), "action": task.action},
            "position": position, "total": total, "flag_reasons": Flag.Reason.choices, "triage": {},
            "in_hand": task.status == FeedbackTask.Status.ASSIGNED and task.writer_id == user.pk}


def _posted_rating(request) -> dict:
    return {"score": request.POST.get("score", ""), "action": request.POST.get("action", "")}
