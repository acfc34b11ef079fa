"""The authorisation matrix over workspaces, generated from the URL configuration as
tests/memweb/test_roles.py's is: every page and API route whose path names an object (a bank, an
Orb, a run, a campaign, a webhook, ...) is called with an object of another workspace, as each
role the route admits (and, for the API, with a key of every scope): the answer is 404, never 403,
so nobody learns that it exists. The same call by an admin of the object's own workspace is
admitted (not 403/404), which shows the 404 comes from the workspace and not from a bad path.

Routes whose path names no workspace object (lists, forms, global settings) are covered by the
list checks below and by the services' own scoping tests.
"""
import json
import re
from dataclasses import dataclass
from functools import cached_property

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import get_resolver, reverse

from annotation.models import Assignment, Campaign, FeedbackTask, Item
from evaluation.models import Task
from evaluation.runs.models import EvaluationRun, FeedbackCurve
from evaluation.scores.models import ScoreDefinition
from evaluation.services import episode_run, tasks_import_jsonl
from memweb.api import api
from memweb.models import ApiKey, Job, Membership, Workspace
from memweb.roles import Role
from memweb.webhooks import webhook_create, webhook_test_send
from orbs.dmrm.services.learning import Transition, experiences_append_batch
from orbs.models import EpisodeRecord, RetrievalLog
from orbs.services import bank_get_or_create, orb_from_episode
from orbs.services.proposals import proposal_create
from tests.annotation.conftest import item_fields
from tests.evaluation.conftest import _generated
from tests.memweb.test_roles import PUBLIC_PAGES, _walk
from tests.orbs.conftest import success_trajectory

# Path parameters that name no workspace object, with the reason.
GLOBAL_PARAMETERS = {
    "probe_id": "the health page's round trip through the broker: infrastructure, no one's data",
    "profile_id": "simulated-user feedback profiles are one server-wide configuration",
    "view_id": "a saved view belongs to a user, not a workspace: another user's is a 404 (tests/memweb/test_saved_views.py)",
}
# Page-route parameters whose meaning depends on the route: a page of the orbs app named `pk` is
# an experience, elsewhere a campaign; a token is a feedback task's on the writing routes.
ROLES = (Role.OPERATOR, Role.REVIEWER, Role.ANNOTATOR, Role.ADMIN)


@dataclass(frozen=True)
class Route:
    label: str
    method: str | None  # None: a page (GET, else POST when GET is not allowed)
    template: str  # a URL name (pages) or a path with {parameters} (API)
    parameters: tuple[str, ...]
    roles: tuple[str, ...]
    review: bool = False


def _page_routes() -> list[Route]:
    routes = []
    for pattern, namespace, converters in _walk(get_resolver().url_patterns):
        name = f"{namespace}:{pattern.name}".strip(":")
        if name not in PUBLIC_PAGES and converters:
            routes.append(Route(name, None, name, tuple(converters), tuple(pattern.callback.required_roles)))
    return routes


def _api_routes() -> list[Route]:
    root, routes = reverse("api:api-root"), []
    for bound in api._get_bound_routers():
        for path, path_view in bound.path_operations.items():
            template = re.sub(r"/+", "/", f"{root}{bound.prefix}/{path}")
            parameters = tuple(re.findall(r"\{(?:\w+:)?(\w+)\}", template))
            for operation in path_view.operations:
                access = operation.auth_callbacks[0].access if operation.auth_callbacks else None
                if parameters and access is not None:
                    routes.extend(Route(f"{method} {template}", method, template, parameters, access.roles,
                                        access.review) for method in operation.methods)
    return routes


ROUTES = [route for route in _page_routes() + _api_routes() if not set(route.parameters) & set(GLOBAL_PARAMETERS)]


class Owned:
    """One object of each kind in a workspace, each made when a route first names it."""

    def __init__(self, workspace: Workspace, admin):
        self.workspace, self.admin = workspace, admin
        self._values: dict[tuple[str, str], object] = {}

    @cached_property
    def bank(self):
        return bank_get_or_create(name=f"bank of {self.workspace.slug}", workspace=self.workspace)

    @cached_property
    def orb(self):
        return orb_from_episode(bank=self.bank, trajectory=success_trajectory("Where is my parcel?")).orb

    @cached_property
    def experience(self):
        step = Transition(goal="return a shirt", observation="asked", action="get_order", reward=1.0,
                          next_observation="found", trajectory_id="t1", step=0, done=True, success=True)
        return experiences_append_batch(bank=self.bank, transitions=[step])[0]

    @cached_property
    def task(self):
        tasks_import_jsonl(text=json.dumps(_generated()[0]), task_set_name=f"tasks of {self.workspace.slug}",
                           workspace=self.workspace)
        return Task.objects.get(task_set__workspace=self.workspace)

    @cached_property
    def episode(self):
        return episode_run(task=self.task)

    @cached_property
    def run(self):
        return EvaluationRun.objects.create(workspace=self.workspace, name="a run", status=EvaluationRun.Status.COMPLETED)

    @cached_property
    def campaign(self):
        return Campaign.objects.create(workspace=self.workspace, name=f"campaign of {self.workspace.slug}",
                                       status=Campaign.Status.OPEN)

    @cached_property
    def assignment(self):
        item = Item.objects.create(campaign=self.campaign, **item_fields())
        return Assignment.objects.create(campaign=self.campaign, item=item, annotator=self.admin)

    @cached_property
    def feedback_task(self):
        item = Item.objects.create(campaign=self.campaign, **item_fields())
        return FeedbackTask.objects.create(campaign=self.campaign, item=item, writer=self.admin,
                                           status=FeedbackTask.Status.ASSIGNED)

    @cached_property
    def member(self):
        """A user of this workspace alone, whom its admin may manage."""
        user = get_user_model().objects.create_user(f"member-of-{self.workspace.slug}")
        Membership.objects.create(workspace=self.workspace, user=user, role=Role.OPERATOR)
        return user

    @cached_property
    def webhook(self):
        return webhook_create(url="https://receiver.example/hook", events=["run.finished"], workspace=self.workspace)[0]

    @cached_property
    def score_definition(self):
        return ScoreDefinition.objects.create(task_set=self.task.task_set, name="a score", slug="a-score",
                                              kind="reply_matches", config={"pattern": "sorry", "mode": "must"})

    def value(self, route: Route, parameter: str):
        """The value of a path parameter naming this workspace's object of the kind the route expects
        (made once per route)."""
        key = (route.label, parameter)
        if key not in self._values:
            self._values[key] = self._made(route, parameter)
        return self._values[key]

    def _made(self, route: Route, parameter: str):
        if parameter == "token":
            writing = "write" in route.label or "feedback-tasks" in route.label
            return (self.feedback_task if writing else self.assignment).token
        if parameter == "pk":
            return (self.experience if route.label.startswith("orbs:") else self.campaign).pk
        simple = {
            "slug": lambda: self.bank.slug, "orb_id": lambda: self.orb.pk, "experience_id": lambda: self.experience.pk,
            "ingest_id": lambda: EpisodeRecord.objects.create(bank=self.bank, trajectory={}).pk,
            "retrieval_id": lambda: RetrievalLog.objects.create(bank=self.bank, query="q", rewritten_query="q", k=1).pk,
            "task_id": lambda: self.task.pk, "task_set_id": lambda: self.task.task_set_id,
            "definition_id": lambda: self.score_definition.pk,
            "episode_id": lambda: self.episode.pk, "run_id": lambda: self.run.pk,
            "curve_id": lambda: FeedbackCurve.objects.create(run=self.run, batch_size=1, batches=1).pk,
            "campaign_id": lambda: self.campaign.pk, "annotator_id": lambda: self.assignment.annotator_id,
            "proposal_id": lambda: proposal_create(orb=self.orb, kind="delete", reason="r", actor=self.admin).pk,
            "webhook_id": lambda: self.webhook.pk, "delivery_id": lambda: webhook_test_send(self.webhook).pk,
            "job_id": lambda: Job.objects.create(workspace=self.workspace, kind="orbs.bank_import", title="a job").pk,
            "key_id": lambda: ApiKey.issue(user=self.admin, name="a key", workspace=self.workspace)[0].pk,
            "membership_id": lambda: Membership.objects.get_or_create(workspace=self.workspace, user=self.admin,
                                                                      role=Role.OPERATOR)[0].pk,
            "item_id": lambda: Item.objects.create(campaign=self.campaign, **item_fields()).pk,
            "workspace_id": lambda: self.workspace.pk, "user_id": lambda: self.member.pk,
            "kind": lambda: "campaign", "fmt": lambda: "jsonl", "target": lambda: "campaign",
        }
        return simple[parameter]()

    def url(self, route: Route) -> str:
        values = {parameter: self.value(route, parameter) for parameter in route.parameters}
        if route.method is None:
            return reverse(route.template, kwargs=values)
        return re.sub(r"\{(?:\w+:)?(\w+)\}", lambda match: str(values[match.group(1)]), route.template)


# Valid bodies, so that the route reaches its object look-up (a body that does not validate is a
# 422 before it): the review routes, retrieval and the other writes an agent or reviewer makes most.
VERSION = {"expected_version": 1}
BODIES = {
    "POST /api/orbs/orbs/{orb_id}/approve": VERSION, "POST /api/orbs/orbs/{orb_id}/reject": VERSION | {"note": "r"},
    "POST /api/orbs/orbs/{orb_id}/edit": VERSION | {"outcome": "o"}, "POST /api/orbs/orbs/{orb_id}/restore": VERSION,
    "POST /api/orbs/orbs/{orb_id}/merge": VERSION | {"into_id": 1}, "DELETE /api/orbs/orbs/{orb_id}": VERSION | {"reason": "r"},
    "POST /api/orbs/orbs/{orb_id}/proposals": {"kind": "delete", "reason": "r"},
    "POST /api/orbs/banks/{slug}/retrieve": {"query": "q"}, "POST /api/orbs/banks/{slug}/remember": {"text": "t"},
    "POST /api/orbs/retrievals/{retrieval_id}/outcome": {"success": True},
    "POST /api/orbs/experiences/banks/{slug}/retrieve": {"goal": "g", "observation": "o"},
    "DELETE /api/orbs/experiences/banks/{slug}/experiences/{experience_id}": VERSION | {"reason": "r"},
    "POST /api/orbs/experiences/banks/{slug}/experiences/{experience_id}/restore": VERSION,
    "POST /api/annotation/campaigns/{campaign_id}/status": {"status": "closed"},
    "POST /api/evaluation/scores/task-sets/{task_set_id}/definitions": {"name": "n", "kind": "turns_at_most",
                                                                       "config": {"turns": 3}},
    "PATCH /api/webhooks/{int:webhook_id}": {"active": False},
}


def _call(client: Client, route: Route, url: str, **headers):
    if route.method is not None:
        body = json.dumps(BODIES.get(route.label, {}))
        return client.generic(route.method, url, body, "application/json", headers=headers)
    response = client.get(url, headers=headers)
    return client.post(url, headers=headers) if response.status_code == 405 else response


def _admits(role: str, route: Route) -> bool:
    return role == Role.ADMIN or not route.roles or role in route.roles


@pytest.fixture
def other(user_for_role):
    workspace = Workspace.objects.create(slug="other", name="Other team")
    return Owned(workspace, user_for_role(Role.ADMIN, workspace=workspace))


def _missing_url(route: Route, url: str, other: Owned) -> str:
    """The same path with every object replaced by one that exists nowhere."""
    for parameter in route.parameters:
        present = str(other.value(route, parameter)) if parameter not in ("kind", "fmt") else None
        if present:
            url = url.replace(present, "none-such" if parameter == "slug" else MISSING.get(parameter, "999999"))
    return url


MISSING = {"token": "00000000-0000-0000-0000-000000000000"}
# Own-workspace answers that are 404 by design, with the reason.
OWN_404 = {"GET /api/evaluation/feedback/episodes/{episode_id}": "an episode without simulated feedback yet",
           "POST /api/orbs/orbs/{orb_id}/merge": "the body merges into Orb #1, which exists nowhere",
           "orbs:duplicates": "the Orb has no near-duplicate, so it heads no group"}


def _refused_as_missing(client: Client, route: Route, url: str, missing: str, **headers) -> bool:
    """404, or the same refusal a path to nothing gets (a body that does not validate is a 422
    before any object is looked up: the routes with a valid body in BODIES must answer 404)."""
    answer = _call(client, route, url, **headers).status_code
    if answer == 404:
        return True
    return route.method is not None and route.label not in BODIES and answer == _call(
        client, route, missing, **headers).status_code


@pytest.mark.django_db
@pytest.mark.parametrize("route", ROUTES, ids=[route.label for route in ROUTES])
def test_it_answers_another_workspaces_object_as_a_missing_one_on_every_route(route, other, user_for_role, client):
    url = other.url(route)
    missing = _missing_url(route, url, other)
    for role in (role for role in ROLES if _admits(role, route)):
        client.force_login(user_for_role(role))  # a member of the default workspace only
        assert _refused_as_missing(client, route, url, missing), (role, url)
    if route.method is not None and not route.review:
        secret = ApiKey.issue(user=user_for_role(Role.ADMIN), name="every scope")[1]
        client.logout()
        assert _refused_as_missing(client, route, url, missing, Authorization=f"Bearer {secret}"), url
    client.force_login(other.admin)  # the object's own workspace
    assert _call(client, route, url).status_code not in (403, *(() if route.label in OWN_404 else (404,))), url


def test_it_finds_the_routes_it_must_check():
    labels = {route.label for route in ROUTES}
    assert {"orbs:bank_detail", "orbs:detail", "evaluation:run_detail", "annotation:campaign_detail",
            "POST /api/orbs/banks/{slug}/retrieve", "POST /api/orbs/orbs/{orb_id}/approve",
            "GET /api/jobs/{job_id}", "api_key_revoke", "membership_remove"} <= labels
