"""Core pages: sign in/out, home with live counts, health, agent API keys, background jobs."""
from datetime import timedelta

from django import forms
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.views import LoginView
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.cache import patch_cache_control
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from memweb.auth import login_limited
from memweb.health import health_report
from memweb.jobs import jobs_visible_to
from memweb.listing import Sorting, list_page
from memweb.models import ApiKey, Job, TaskProbe
from memweb.navigation import home_charts_for, home_counts_for, nav_for
from memweb.registry import api_scopes
from memweb.roles import Role, has_role, role_required
from memweb.services import probe_queue, workers_live

# After this long without a worker the probe partial says so (and keeps polling, slower).
PROBE_PATIENCE = timedelta(seconds=30)
JOB_SORTING = Sorting(columns={"job": "title", "status": "status", "progress": "done", "asked": "created_at"})
_login_page = LoginView.as_view(template_name="registration/login.html", redirect_authenticated_user=True)


@require_http_methods(["GET", "POST"])
def login_view(request):
    return login_limited(request, sign_in=lambda: _login_page(request))


@require_POST
def logout_view(request):
    logout(request)
    messages.info(request, "You are signed out.")
    return redirect("login")


@require_GET
@role_required()
def home(request):
    context = {"counts": home_counts_for(user=request.user, workspace=request.workspace)}
    if request.htmx:
        return render(request, "memweb/_counts.html", context)
    context["shortcuts"] = [link for link in nav_for(user=request.user, current_path="") if link["url"] != "/"]
    context["charts"] = home_charts_for(user=request.user, workspace=request.workspace)
    return render(request, "memweb/home.html", context)


@require_GET
@role_required()
def health(request):
    return render(request, "memweb/health.html", {"report": health_report()})


@require_POST
@role_required(Role.OPERATOR)
def probe_send(request):
    probe = probe_queue()
    if request.htmx:
        return render(request, "memweb/_probe.html", _probe_context(probe))
    messages.info(request, "Probe task queued; this page shows its round trip once a worker has run it.")
    return redirect("health")


@require_GET
@role_required(Role.OPERATOR)
def probe_status(request, probe_id: int):
    """Polled by the health page until a worker has completed the probe."""
    probe = get_object_or_404(TaskProbe, pk=probe_id)
    return render(request, "memweb/_probe.html", _probe_context(probe))


def _probe_context(probe: TaskProbe) -> dict:
    waited = (probe.done_at or timezone.now()) - probe.queued_at
    return {"probe": probe, "elapsed_ms": round(waited.total_seconds() * 1000), "stalled": waited > PROBE_PATIENCE}


class ApiKeyForm(forms.Form):
    name = forms.CharField(
        max_length=ApiKey._meta.get_field("name").max_length,
        label="Key name",
        help_text="Which agent or script will use it, e.g. “shop-agent staging”.",
    )
    scopes = forms.MultipleChoiceField(
        choices=lambda: [(scope.value, scope.label) for scope in api_scopes()],
        widget=forms.CheckboxSelectMultiple, label="Scopes",
        initial=lambda: [scope.value for scope in api_scopes() if getattr(scope, "ticked_for_new_keys", False)],
        help_text="What the key may call, in this workspace. No scope approves, edits or rejects memories.",
        error_messages={"required": "Choose at least one scope."},
    )
    expires_on = forms.DateField(
        required=False, label="Expires after", widget=forms.DateInput(attrs={"type": "date"}),
        help_text="Optional: the last day the key works. Empty: it works until revoked.",
        error_messages={"invalid": "Enter a date as YYYY-MM-DD."},
    )

    def clean_expires_on(self):
        day = self.cleaned_data["expires_on"]
        if day is not None and day < timezone.localdate():
            raise forms.ValidationError("This day has passed: choose today or a later day.")
        return day


def _keys_visible_to(request):
    """The current workspace's keys: all of them for its admins, else the user's own."""
    keys = ApiKey.objects.select_related("user")
    return keys if has_role(request.user, Role.ADMIN) else keys.filter(user=request.user)


def _api_keys_page(request, *, form, new_secret: str = "", status: int = 200):
    context = {"keys": _keys_visible_to(request), "form": form, "new_secret": new_secret}
    return render_uncached(request, "memweb/api_keys.html", context, status=status)


def render_uncached(request, template: str, context: dict, *, status: int = 200):
    """A page that may show a secret once (a new API key, a webhook's signing secret): no cache keeps it."""
    response = render(request, template, context, status=status)
    patch_cache_control(response, no_store=True)
    return response


@require_GET
@role_required(Role.OPERATOR)
def api_keys(request):
    return _api_keys_page(request, form=ApiKeyForm())


@require_POST
@role_required(Role.OPERATOR)
def api_key_create(request):
    form = ApiKeyForm(request.POST)
    if not form.is_valid():
        return _api_keys_page(request, form=form, status=400)
    key, secret = ApiKey.issue(user=request.user, name=form.cleaned_data["name"], workspace=request.workspace,
                               scopes=form.cleaned_data["scopes"], expires_on=form.cleaned_data["expires_on"])
    messages.success(request, f"API key “{key.name}” created. Copy it now: it is shown only once.")
    return _api_keys_page(request, form=ApiKeyForm(), new_secret=secret)


@require_POST
@role_required(Role.OPERATOR)
def api_key_revoke(request, key_id: int):
    key = get_object_or_404(_keys_visible_to(request), pk=key_id, revoked_at__isnull=True)
    key.revoke()
    messages.success(request, f"API key “{key.name}” revoked; agents using it now get 401.")
    return redirect("api_keys")


@require_GET
@role_required()
def job_list(request):
    return list_page(request, rows=jobs_visible_to(request.user), template="memweb/job_list.html",
                     partial="memweb/_job_rows.html", sorting=JOB_SORTING)


@require_GET
@role_required()
def job_detail(request, job_id: int):
    """The job's page; htmx polls it for the progress card alone until the job has finished."""
    job = get_object_or_404(jobs_visible_to(request.user), pk=job_id)
    context = {"job": job, "no_worker": job.status == Job.Status.QUEUED and not workers_live()}
    return render(request, "memweb/_job_card.html" if request.htmx else "memweb/job_detail.html", context)
