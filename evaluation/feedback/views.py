"""Operator pages of simulated feedback: calibration, user profiles, the feedback browser, and
generating one episode's feedback from its transcript page."""
from urllib.parse import urlencode

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from evaluation.feedback.forms import BrowserForm, CalibrationForm, CampaignFitForm, ProfileForm, SelectionForm
from evaluation.feedback.models import CalibrationSetting, FeedbackProfile
from evaluation.feedback.services import (
    calibration_curves,
    calibration_fit,
    calibration_histogram,
    calibration_recalibrate,
    calibration_refit,
    calibration_table,
    calibration_update,
    feedback_browse,
    feedback_for_episode,
    feedback_rates,
    profiles_ensure_defaults,
)
from evaluation.models import Episode
from memweb.listing import Sorting, list_page
from memweb.roles import Role, role_required

# --- calibration ---------------------------------------------------------------------------------

def _calibration_context(request, setting: CalibrationSetting, form: CalibrationForm) -> dict:
    selection = SelectionForm(request.GET or None, workspace=request.workspace)
    table = calibration_table(params=setting.params())
    rates = feedback_rates(episodes=selection.episodes(), params=setting.params())
    return {"setting": setting, "form": form, "table": table, "selection": selection, "rates": rates,
            "selection_label": selection.label(), "curves": calibration_curves(table=table),
            "histogram_chart": calibration_histogram(table=table, rates=rates), **_people_context(request, request.GET)}


def _people_context(request, data) -> dict:
    """The campaign choice and, once a campaign is chosen, the fit to its people or why there is none."""
    form = CampaignFitForm(data if data and data.get("campaign") else None, workspace=request.workspace)
    if not form.is_bound:
        return {"fit_form": form}
    if not form.is_valid():
        return {"fit_form": form, "fit_problem": "choose one of the listed campaigns"}
    try:
        return {"fit_form": form, "fit": calibration_fit(campaign=form.cleaned_data["campaign"])}
    except ValueError as exc:
        return {"fit_form": form, "fit_problem": str(exc)}


@require_GET
@role_required(Role.OPERATOR)
def feedback_calibration(request):
    setting = CalibrationSetting.current()
    context = _calibration_context(request, setting, CalibrationForm.for_setting(setting))
    if request.htmx:
        return render(request, "evaluation/feedback/_rates.html", context)
    return render(request, "evaluation/feedback/calibration.html", context)


@require_POST
@role_required(Role.OPERATOR)
def feedback_calibration_update(request):
    setting = CalibrationSetting.current()
    form = CalibrationForm(request.POST)
    if not form.is_valid():
        context = _calibration_context(request, setting, form)
        return render(request, "evaluation/feedback/calibration.html", context, status=422)
    source = "edited on the calibration page" if form.has_changed() else None
    calibration_update(setting=setting, params=form.params, user=request.user, source=source)
    messages.success(request, "Calibration saved; new feedback uses it.")
    return redirect("evaluation:feedback_calibration")


@require_POST
@role_required(Role.OPERATOR)
def feedback_recalibrate(request):
    selection = SelectionForm(request.POST, workspace=request.workspace)
    try:
        setting = calibration_recalibrate(episodes=selection.episodes(), user=request.user, label=selection.label())
    except ValueError as exc:
        messages.error(request, f"Not recalibrated: {exc}")
    else:
        messages.success(request, f"Recalibrated: {setting.distribution_source}.")
    query = urlencode({k: v for k, v in request.POST.items() if k in ("latest", "domain")})
    return redirect(f"{reverse('evaluation:feedback_calibration')}?{query}")


@require_GET
@role_required(Role.OPERATOR)
def feedback_calibration_fit(request):
    """Preview of the action model refitted to a campaign's people; the page itself shows it too."""
    if request.htmx:
        return render(request, "evaluation/feedback/_people_fit.html", _people_context(request, request.GET))
    return redirect(f"{reverse('evaluation:feedback_calibration')}?{request.GET.urlencode()}")


@require_POST
@role_required(Role.OPERATOR)
def feedback_calibration_refit(request):
    form = CampaignFitForm(request.POST, workspace=request.workspace)
    try:
        if not form.is_valid():
            raise ValueError("choose one of the listed campaigns")
        setting = calibration_refit(campaign=form.cleaned_data["campaign"], user=request.user)
    except ValueError as exc:
        messages.error(request, f"Not recalibrated: {exc}. Nothing was changed.")
    else:
        messages.success(request, f"Recalibrated: {setting.distribution_source}.")
    # Back to the same campaign's preview, which now says whether the fit is the calibration.
    query = urlencode({"campaign": request.POST.get("campaign", "")})
    return redirect(f"{reverse('evaluation:feedback_calibration')}?{query}#people")


# --- profiles ----------------------------------------------------------------------------------

@require_GET
@role_required(Role.OPERATOR)
def feedback_profiles(request):
    return render(request, "evaluation/feedback/profile_list.html", {"profiles": profiles_ensure_defaults()})


@require_http_methods(["GET", "POST"])
@role_required(Role.OPERATOR)
def feedback_profile_edit(request, profile_id: int | None = None):
    profile = get_object_or_404(FeedbackProfile, pk=profile_id) if profile_id else None
    form = ProfileForm(request.POST or None, instance=profile)
    if profile is not None:
        form.fields["key"].disabled = True  # feedback rows and episodes find their profile by this key
    if request.method == "POST" and form.is_valid():
        saved = form.save(commit=False)
        saved.updated_by, saved.updated_at = request.user, timezone.now()
        saved.save()
        messages.success(request, f"Profile {saved.key} saved.")
        return redirect("evaluation:feedback_profiles")
    status = 422 if request.method == "POST" else 200
    preview = profile.system_prompt() if profile else ""
    return render(request, "evaluation/feedback/profile_form.html",
                  {"form": form, "profile": profile, "preview": preview}, status=status)


# --- browser and generation ----------------------------------------------------------------------

FEEDBACK_SORTING = Sorting(columns={"episode": "episode_id", "task": "episode__task__external_id", "score": "score",
                                    "action": "action", "when": "created_at"})


@require_GET
@role_required(Role.OPERATOR)
def feedback_browser(request):
    form = BrowserForm(request.GET or None, workspace=request.workspace)
    rows = feedback_browse(**form.filters())
    return list_page(request, rows=rows, template="evaluation/feedback/browser.html",
                     partial="evaluation/feedback/_feedback_rows.html", sorting=FEEDBACK_SORTING,
                     context={"form": form})


@require_POST
@role_required(Role.OPERATOR)
def feedback_generate(request, episode_id: int):
    episode = get_object_or_404(Episode, pk=episode_id)
    try:
        feedback_for_episode(episode=episode, seed=episode.seed)
    except ValueError as exc:
        messages.error(request, f"No feedback generated: {exc}")
    else:
        messages.success(request, "Simulated feedback generated.")
    return redirect(episode)
