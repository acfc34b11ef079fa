"""DMRM pages: the experience browser with review and Q-value chart, per-bank
settings, and the source-memory builder with its preview."""
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from memweb.listing import Sorting, query_without_page, sorted_page
from memweb.roles import Role, has_role, role_required
from orbs.dmrm.forms import DMRMSettingsForm, ExperienceFilterForm, ReviewForm, SourceBuildForm
from orbs.dmrm.models import Experience
from orbs.dmrm.qlearning import histogram
from orbs.dmrm.services import (
    dmrm_settings_get,
    experience_delete,
    experience_restore,
    experience_review,
    experiences_updates,
    source_memory_build_start,
    source_memory_preview,
    source_trajectories_from_episodes,
    successful_trajectories,
)
from orbs.errors import OrbsError
from orbs.models import MemoryBank

PREVIEW_ROWS = 100
CHART_SAMPLE = 5000
RECENT_RETRIEVALS = 10
READERS = (Role.REVIEWER, Role.OPERATOR)
EXPERIENCE_SORTING = Sorting(columns={"id": "pk", "memory": "memory", "goal": "goal", "action": "action",
                                      "reward": "reward", "q": "q_value", "visits": "visits", "trajectory": "trajectory_id",
                                      "status": "status"})


def _browser_context(request) -> dict:
    form = ExperienceFilterForm(request.GET or None, workspace=request.workspace)
    experiences = Experience.objects.select_related("bank", "source_memory")
    queryset = form.filtered(experiences.defer("vector"))
    listed = sorted_page(request, queryset, sorting=EXPERIENCE_SORTING)
    q_values = list(queryset.order_by().values_list("q_value", flat=True)[:CHART_SAMPLE])
    return {**listed, "form": form, "chart": histogram(q_values), "total": listed["page"].paginator.count,
            "can_review": has_role(request.user, Role.REVIEWER), "can_build": has_role(request.user, Role.OPERATOR),
            "updates": experiences_updates(queryset=queryset)}


@require_GET
@role_required(*READERS)
def experience_list(request):
    context = _browser_context(request)
    status = 422 if context["form"].errors else 200
    if request.htmx:
        return render(request, "orbs/dmrm/_experience_results.html", context, status=status)
    return render(request, "orbs/dmrm/experience_list.html", context, status=status)


def _decide(pk: int, data: dict, actor) -> Experience:
    """A review decision, a (soft) deletion with the note as its reason, or a restoration."""
    version, note = data["version"], data["note"]
    if data["decision"] == "deleted":
        return experience_delete(experience_id=pk, expected_version=version, actor=actor, reason=note)
    if data["decision"] == "restored":
        return experience_restore(experience_id=pk, expected_version=version, actor=actor, note=note)
    return experience_review(experience_id=pk, expected_version=version, status=data["decision"], actor=actor,
                             note=note)


@require_POST
@role_required(Role.REVIEWER)
def experience_review_action(request, pk: int):
    experience = get_object_or_404(Experience, pk=pk)
    form = ReviewForm(request.POST)
    error = ""
    if form.is_valid():
        try:
            experience = _decide(pk, form.cleaned_data, request.user)
        except OrbsError as refused:
            error = str(refused)
    else:
        error = "; ".join(f"{field}: {' '.join(errs)}" for field, errs in form.errors.items())
    if request.htmx:
        return render(request, "orbs/dmrm/_experience_row.html",
                      {"e": experience, "error": error, "can_review": True}, status=422 if error else 200)
    (messages.error if error else messages.success)(request, error or f"Experience #{pk} {experience.status}.")
    return redirect("orbs:experience_list")


def _settings_page(request, bank, form, status=200):
    return render(request, "orbs/dmrm/settings.html", {
        "bank": bank, "form": form, "can_edit": has_role(request.user, Role.OPERATOR, Role.REVIEWER),
        "successes": successful_trajectories(bank=bank),
        "source_memories": bank.source_memories.all(), "retrievals": bank.dmrm_retrievals.all()[:RECENT_RETRIEVALS],
    }, status=status)


@require_GET
@role_required(*READERS)
def dmrm_settings(request, slug: str):
    bank = get_object_or_404(MemoryBank, slug=slug)
    return _settings_page(request, bank, _settings_form(request, None, bank))


def _settings_form(request, data, bank) -> DMRMSettingsForm:
    """Operators set learning and retrieval; reviewers the review gate (admins both)."""
    return DMRMSettingsForm(data, instance=dmrm_settings_get(bank=bank), operator=has_role(request.user, Role.OPERATOR),
                            reviewer=has_role(request.user, Role.REVIEWER))


@require_POST
@role_required(Role.OPERATOR, Role.REVIEWER)
def dmrm_settings_save(request, slug: str):
    bank = get_object_or_404(MemoryBank, slug=slug)
    form = _settings_form(request, request.POST, bank)
    if not form.is_valid():
        return _settings_page(request, bank, form, status=422)
    form.save()
    messages.success(request, "DMRM settings saved.")
    return redirect("orbs:dmrm_settings", bank.slug)


def _preview(form: SourceBuildForm, bank) -> tuple[list, list]:
    data = form.cleaned_data
    trajectories = source_trajectories_from_episodes(domain=data["source_domain"], workspace=bank.workspace)
    candidates = source_memory_preview(trajectories=trajectories, gamma=data["gamma"],
                                       min_reward=data["min_reward"], min_q=data["min_q"])
    return trajectories, candidates


def _builder_page(request, bank, form, *, status=200):
    context = {"bank": bank, "form": form}
    if form.is_bound and form.is_valid():
        trajectories, candidates = _preview(form, bank)
        context.update(episodes=len(trajectories), page=Paginator(candidates, PREVIEW_ROWS).get_page(request.GET.get("page")),
                       query=query_without_page(request), total=len(candidates), kept=sum(c.included for c in candidates))
    return render(request, "orbs/dmrm/source_builder.html", context, status=status)


@require_http_methods(["GET", "POST"])
@role_required(Role.OPERATOR)
def dmrm_source(request, slug: str):
    """The builder; a preview is posted (the form carries the CSRF token the Build button needs) and
    answered with a redirect to its address, which holds the settings only and pages the steps."""
    bank = get_object_or_404(MemoryBank, slug=slug)
    if request.method == "GET":
        return _builder_page(request, bank, SourceBuildForm(request.GET or None))
    form = SourceBuildForm(request.POST)
    if not form.is_valid():
        return _builder_page(request, bank, form, status=422)
    settings = {name: request.POST.get(name, "") for name in form.fields}
    return redirect(f"{reverse('orbs:dmrm_source', args=[bank.slug])}?{urlencode(settings)}")


@require_POST
@role_required(Role.OPERATOR)
def dmrm_source_build(request, slug: str):
    bank = get_object_or_404(MemoryBank, slug=slug)
    form = SourceBuildForm(request.POST)
    if not form.is_valid():
        return _builder_page(request, bank, form, status=422)
    data = form.cleaned_data
    try:
        job = source_memory_build_start(bank=bank, name=data["name"], source_domain=data["source_domain"],
                                        gamma=data["gamma"], min_reward=data["min_reward"], min_q=data["min_q"],
                                        actor=request.user)
    except OrbsError as refused:
        field, _, message = str(refused).partition(": ")
        form.add_error(field if field in form.fields else None, message or str(refused))
        return _builder_page(request, bank, form, status=422)
    # Embedding the steps takes minutes: a worker builds, the job's page follows it.
    return redirect("job_detail", job.pk)
