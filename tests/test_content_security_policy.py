"""The Content-Security-Policy: on every answer (pages, the API, static files, errors), and no page of
any app breaks it, in a real browser, signed in as an admin with data on every page (charts, htmx
partials, the API docs). The browser reports each refused script or style as a
`securitypolicyviolation` event, which the pages' first script records."""
import pytest
from django.urls import reverse

from annotation.models import Campaign, Item
from evaluation.models import Episode
from evaluation.runs.services import run_drive, run_launch
from evaluation.services import taskset_builtin_load
from orbs.dmrm.services import experience_append
from orbs.services import bank_get_or_create, orb_from_episode
from tests.annotation.conftest import item_fields
from tests.browser import login
from tests.evaluation.runs.conftest import spec
from tests.orbs.conftest import success_trajectory

RECORD_VIOLATIONS = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => window.cspViolations.push(
    `${event.violatedDirective} blocked ${event.blockedURI || "inline"} at ${event.sourceFile}:${event.lineNumber}`));
"""


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/", "/login/", "/api/openapi.json", "/api/no-such-route", "/no-such-page/",
                                  "/static/memweb/app.css", "/admin/login/"])
def test_every_answer_carries_the_policy(client, path):
    policy = client.get(path)["Content-Security-Policy"]
    directives = dict(part.split(" ", 1) for part in policy.split("; "))
    assert directives["script-src"] == "'self'" and "unsafe" not in directives["script-src"]
    assert (directives["default-src"], directives["object-src"], directives["frame-ancestors"],
            directives["base-uri"], directives["form-action"]) == ("'self'", "'none'", "'none'", "'self'", "'self'")
    assert "unsafe" not in policy and "style-src-attr" not in directives


def _data(operator_user) -> dict:
    taskset_builtin_load()
    run = run_launch(spec=spec(trials=2, feedback_enabled=True), user=operator_user)
    run = run_drive(run=run)
    bank = bank_get_or_create(name="Policy shop")
    orb = orb_from_episode(bank=bank, trajectory=success_trajectory("My kettle arrived broken.")).orb
    experience_append(bank=bank, trajectory_id="t1", step=0, goal="return the kettle", observation="delivered",
                      action="return_item(W7)", reward=1.0)
    campaign = Campaign.objects.create(name="Policy study", status=Campaign.Status.OPEN, created_by=operator_user)
    Item.objects.create(campaign=campaign, **item_fields())
    return {"run": run, "bank": bank, "orb": orb, "campaign": campaign, "episode": Episode.objects.first()}


def _main_pages(data) -> list[str]:
    run, bank, orb, campaign, episode = data["run"], data["bank"], data["orb"], data["campaign"], data["episode"]
    return [
        reverse("home"), reverse("job_list"), reverse("health"), reverse("api_keys"), reverse("webhooks"),
        reverse("workspaces"), "/api/docs",
        reverse("orbs:queue"), reverse("orbs:bank_list"), reverse("orbs:bank_detail", args=[bank.slug]),
        reverse("orbs:detail", args=[orb.pk]), reverse("orbs:experience_list"),
        reverse("orbs:dmrm_settings", args=[bank.slug]), reverse("orbs:dmrm_source", args=[bank.slug]),
        reverse("evaluation:task_list"), reverse("evaluation:task_detail", args=[episode.task_id]),
        reverse("evaluation:run_list"), reverse("evaluation:run_new"), reverse("evaluation:run_detail", args=[run.pk]),
        reverse("evaluation:run_compare") + f"?runs={run.pk}", reverse("evaluation:episode_list"),
        reverse("evaluation:episode_detail", args=[episode.pk]), reverse("evaluation:feedback_browser"),
        reverse("evaluation:feedback_calibration"),
        reverse("annotation:campaign_list"), reverse("annotation:campaign_detail", args=[campaign.pk]),
        reverse("annotation:campaign_results", args=[campaign.pk]),
        reverse("annotation:campaign_throughput", args=[campaign.pk]), reverse("annotation:queue"),
    ]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_no_page_breaks_the_policy(browser_page, live_server, role_admin_user, operator_user):
    pages = _main_pages(_data(operator_user))
    page = browser_page
    page.add_init_script(RECORD_VIOLATIONS)
    login(page, live_server, role_admin_user)
    violations, failed = {}, {}
    for path in pages:
        answer = page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")  # htmx partials loaded on arrival, and their swaps
        if answer.status != 200:
            failed[path] = answer.status
        found = page.evaluate("window.cspViolations")
        if found:
            violations[path] = found
    assert failed == {} and violations == {}
    # Bars take their width from page.js, not from a style attribute the policy would refuse.
    page.goto(live_server.url + reverse("evaluation:run_list"))
    assert page.locator("#run-rows .progress-bar").first.evaluate("bar => bar.style.width") == "100%"
    # The check can see a violation: an inline style added now is refused, and reported.
    page.evaluate("document.head.appendChild(document.createElement('style')).textContent = 'body {}'")
    page.wait_for_function("() => window.cspViolations.length > 0")
    assert page.evaluate("window.cspViolations")[0].startswith("style-src")
