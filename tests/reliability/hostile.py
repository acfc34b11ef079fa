"""What the probe tests share (stored payloads, CSRF, injection): one object of every kind a page
names (the workspace matrix's `Owned`, with a played run and review history added), the real URL of every page route, and a
stored payload written into every free-text column of every model, found by introspection so a
field added later is probed without anyone listing it."""
from functools import cached_property

from django.apps import apps
from django.contrib.auth.models import User
from django.db import models
from django.db.models import Value
from django.db.models.functions import Cast, Concat, Left
from django.urls import get_resolver, reverse

from evaluation.feedback.models import FeedbackProfile
from evaluation.runs.services import run_drive, run_launch
from evaluation.scores.models import EpisodeScore, ScoreDefinition
from memweb.models import SavedView, TaskProbe, Workspace, default_workspace_id
from orbs.services import orb_edit, orb_from_episode, orb_reject
from tests.memweb.test_roles import PUBLIC_PAGES, _walk
from tests.memweb.test_workspace_matrix import Owned, Route
from tests.orbs.conftest import success_trajectory
from tests.orbs.dmrm.conftest import build_approved

PROJECT_APPS = ("memweb", "orbs", "evaluation", "annotation")
# Whatever a form would refuse: `javascript:` in a link field, markup (and a markdown link) elsewhere.
# Each payload starts with a marker naming its field, so a page showing it proves the field rendered.
MARKUP = ("\"'></textarea></title></script><img src=x onerror=window.__xss=1><script>window.__xss=1</script>"
          "[markdown](javascript:window.__xss=1)")  # instructions are markdown
LINK = "javascript:window.__xss=1//"
SHAPE_KEYS = {"role", "type", "kind", "status", "id"}


class World(Owned):
    """One object of each kind in the default workspace, and a little more than the matrix needs:
    a played run with simulated feedback (episodes, transcripts, memories, scores), an Orb with
    review history, a DMRM source memory, a feedback profile, a saved view, a health probe."""

    def __init__(self, admin):
        super().__init__(Workspace.objects.get(pk=default_workspace_id()), admin)

    @cached_property
    def run(self):
        spec = {"name": "hostile run", "task_set": self.task.task_set.name, "task_ids": [self.task.external_id],
                "trials": 1, "memory_mode": "memorb", "per_turn": False, "feedback_enabled": True}
        return run_drive(run=run_launch(spec=spec, user=self.admin))

    @cached_property
    def orb(self):
        orb = super().orb
        orb_edit(orb_id=orb.pk, expected_version=orb.version, actor=self.admin, outcome="Check the order first.")
        rejected = orb_from_episode(bank=self.bank, trajectory=success_trajectory("The lamp is the wrong colour.")).orb
        orb_reject(orb_id=rejected.pk, expected_version=rejected.version, actor=self.admin, reason="not actionable")
        return orb

    @cached_property
    def extras(self) -> dict:
        """Objects of the paths the matrix leaves out (they belong to no workspace), made once."""
        return {
            "profile_id": FeedbackProfile.objects.create(name="a profile", persona="p").pk,
            "probe_id": TaskProbe.objects.create(token="probe").pk,
            "view_id": SavedView.objects.create(user=self.admin, list_name="orbs:queue", name="v",
                                                query="status=pending").pk,
        }

    def _made(self, route: Route, parameter: str):
        return self.extras[parameter] if parameter in self.extras else super()._made(route, parameter)

    def build(self) -> None:
        """Every object a page route names, made now (a page route makes its objects on first use)."""
        for route in page_routes():
            self.url(route)
        for name in ("run", "orb", "experience", "episode", "assignment", "feedback_task", "webhook"):
            getattr(self, name)
        build_approved(self.bank, name="hostile source")
        self._custom_score()

    def _custom_score(self) -> None:
        """An LLM judge's stored score of the episode the episode page shows."""
        judge = ScoreDefinition.objects.create(task_set=self.task.task_set, name="a judge", slug="a-judge",
                                               kind="llm_judge", config={"rubric": "polite?", "scale": "pass_fail"})
        EpisodeScore.objects.create(definition=judge, episode=self.episode, value=1.0, passed=True,
                                    explanation="The agent was polite.", status="scored", judge="judge-model")


def page_routes() -> list[Route]:
    """Every page of the URL configuration, public ones aside (as the authorisation matrix finds them)."""
    routes = []
    for pattern, namespace, converters in _walk(get_resolver().url_patterns):
        name = f"{namespace}:{pattern.name}".strip(":")
        if name not in PUBLIC_PAGES:
            routes.append(Route(name, None, name, tuple(converters), tuple(pattern.callback.required_roles)))
    return routes


def page_url(world: World, route: Route) -> str:
    return world.url(route) if route.parameters else reverse(route.template)


# --- stored payloads --------------------------------------------------------------------------------

def text_fields() -> list[models.Field]:
    """Every free-text column of the project's models and of users: char, text and JSON fields that are not a
    primary key, a closed set of choices or a slug (validated to [-a-z0-9_])."""
    found = []
    for model in apps.get_models():
        if (model._meta.app_label not in PROJECT_APPS and model is not User) or model._meta.proxy:
            continue
        found += [field for field in model._meta.concrete_fields
                  if isinstance(field, models.CharField | models.TextField | models.JSONField)
                  and not field.primary_key and not field.choices and not isinstance(field, models.SlugField)]
    return found


def field_label(field: models.Field) -> str:
    return f"{field.model._meta.label}.{field.name}"


def payload_parts(field: models.Field, marker: str) -> tuple[str, str]:
    """What goes before and after a row's id: the marker (naming the field) and the attack."""
    return (f"{LINK}{marker}", "") if field.name.endswith("url") else (marker, MARKUP)


def poisoned(value, payload: str):
    """`value` with every string in it replaced by `payload`, its shape kept: keys stay, and so do
    the values that say what an entry is (a message's role, an event's type), a closed set the code
    checks, so that each entry is still shown as what it is."""
    if isinstance(value, dict):
        return {key: inner if key in SHAPE_KEYS else poisoned(inner, payload) for key, inner in value.items()}
    if isinstance(value, list):
        return [poisoned(inner, payload) for inner in value]
    return payload if isinstance(value, str) else value


def poison(fields: list[models.Field], markers: dict[str, str]) -> set[str]:
    """Write each field's payload into every row, bypassing forms and the API as a hostile writer
    or a model's answer would reach the database by any path; the labels of the fields written."""
    written = set()
    for field in fields:
        head, tail = payload_parts(field, markers[field_label(field)])
        manager = field.model._base_manager
        if isinstance(field, models.JSONField):
            for pk, value in manager.values_list("pk", field.attname):
                if (changed := poisoned(value, f"{head}{pk}{tail}")) != value:
                    manager.filter(pk=pk).update(**{field.attname: changed})
                    written.add(field_label(field))
        else:  # the row's id after the marker keeps unique columns unique
            text = Concat(Value(head), Cast("pk", models.TextField()), Value(tail), output_field=models.TextField())
            if manager.update(**{field.attname: Left(text, field.max_length) if field.max_length else text}):
                written.add(field_label(field))
    return written
