"""The registry's start-up check (a Django system check) and the apps' own vocabulary: API scopes,
webhook events and LLM roles are declared by the apps that own them and refused when nobody does."""
import pytest
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.utils.module_loading import import_string

from memweb.auth import api_auth
from memweb.llm.config import read_role_config
from memweb.models import ApiKey
from memweb.registry import ATTRIBUTES, Kind, api_scopes, llm_roles, registry_check, webhook_events
from memweb.webhooks import WebhookInvalid, webhook_create, webhooks_emit


def test_every_declaration_of_the_installed_apps_resolves():
    assert registry_check() == []


@pytest.mark.parametrize(("attribute", "entry"), [
    ("job_kinds", ("orbs.bank_import", "orbs.services.transfer.no_such_job")),
    ("bank_file_parts", "orbs.dmrm.services.no_such_module"),
    ("home_counts", ("Orbs", "orbs.services.count_pending", ("reviewer",), "orbs:no_such_page")),
    ("webhook_events", "orbs.vocabulary.no_such_choices"),
])
def test_manage_py_check_names_the_app_the_attribute_and_the_bad_path(monkeypatch, attribute, entry):
    config = apps.get_app_config("orbs")
    monkeypatch.setattr(config, attribute, (*getattr(config, attribute, ()), entry))
    bad = entry if isinstance(entry, str) else next(item for item in entry if "no_such" in item)
    with pytest.raises(SystemCheckError) as failed:
        call_command("check")
    assert f"orbs: OrbsConfig.{attribute}: {bad!r}" in str(failed.value)


def test_the_check_refuses_a_misshapen_entry_and_an_unknown_role(monkeypatch):
    config = apps.get_app_config("annotation")
    monkeypatch.setattr(config, "nav_items", (("Annotate", "annotation:queue"),
                                              ("Campaigns", "annotation:campaign_list", ("curator",))))
    messages = [error.msg for error in registry_check([config])]
    assert messages == [
        "annotation: AnnotationConfig.nav_items: each entry must be a tuple of 3 items, got ('Annotate', 'annotation:queue')",
        "annotation: AnnotationConfig.nav_items: ('curator',) is not a tuple of roles (operator, reviewer, annotator, admin)",
    ]


def test_a_word_declared_by_two_apps_is_refused(monkeypatch):
    monkeypatch.setattr(apps.get_app_config("annotation"), "llm_roles", ("orbs.vocabulary.OrbsLLMRole",),
                        raising=False)
    assert any("'reflector' is declared by orbs too" in error.msg for error in registry_check())


def test_every_attribute_is_documented_in_the_architecture_page():
    from tests.test_architecture import ROOT

    page = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    assert [a.name for a in ATTRIBUTES if f"| `{a.name}` |" not in page] == []
    assert {kind for attribute in ATTRIBUTES for kind in attribute.items} == set(Kind)


def test_each_app_declares_its_own_vocabulary():
    owners = {config.name: [member.value for path in getattr(config, "api_scopes", ()) for member in import_string(path)]
              for config in apps.get_app_configs()}
    assert owners["orbs"] == ["memory:read", "memory:write"] and owners["annotation"] == ["annotation"]
    assert [event.value for event in webhook_events()] == ["episode.ingested", "orb.pending_review", "run.finished"]
    assert {role.value: role.max_tokens for role in llm_roles()} == {
        "reflector": 512, "rewriter": 128, "actor": 512, "user_simulator": 200, "scorer": 512}


def test_an_undeclared_scope_is_refused(django_user_model, db):
    assert "memory:read" in [scope.value for scope in api_scopes()]
    with pytest.raises(ImproperlyConfigured, match="'memory:delete' is declared by no app"):
        api_auth("operator", scope="memory:delete")
    user = django_user_model.objects.create_user("keyholder")
    with pytest.raises(ValueError, match="unknown API scope 'memory:delete'"):
        ApiKey.issue(user=user, name="agent", scopes=["memory:read", "memory:delete"])
    assert ApiKey.objects.count() == 0


def test_an_undeclared_event_is_refused(db):
    with pytest.raises(WebhookInvalid, match="unknown event 'run.started'"):
        webhook_create(url="http://93.184.216.34/hook", events=["run.started"])
    with pytest.raises(ValueError, match="unknown webhook event 'run.started'"):
        webhooks_emit("run.started", {}, workspace_id=1)


def test_an_undeclared_llm_role_is_refused():
    with pytest.raises(ValueError, match="unknown LLM role 'planner'"):
        read_role_config("planner")
