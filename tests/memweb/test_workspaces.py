"""Workspaces from a person's side: roles held per workspace, the switcher in the navigation, and
the admins' page that creates workspaces and manages their members; where a person or a key lands
(`/api/me`, `create_api_key --workspace --scope`)."""
import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from memweb.models import DEFAULT_WORKSPACE_SLUG, ApiKey, Membership, Workspace
from memweb.registry import api_scopes
from memweb.roles import Role
from orbs.services import bank_get_or_create


@pytest.fixture
def two_teams(user_for_role):
    """A user who operates in the default workspace and reviews in another."""
    other = Workspace.objects.create(slug="support", name="Support team")
    person = user_for_role(Role.OPERATOR)
    Membership.objects.create(workspace=other, user=person, role=Role.REVIEWER)
    bank_get_or_create(name="Support memories", workspace=other)
    return person, other


@pytest.mark.django_db
def test_it_switches_workspace_and_with_it_the_roles_and_the_data(client, two_teams):
    person, other = two_teams
    client.force_login(person)
    assert client.get(reverse("api_keys")).status_code == 200  # operator here
    assert "Support memories" not in client.get(reverse("orbs:bank_list")).content.decode()
    switched = client.post(reverse("workspace_switch"), {"workspace": other.pk, "next": reverse("orbs:bank_list")})
    assert switched["Location"] == reverse("orbs:bank_list")
    page = client.get(reverse("orbs:bank_list")).content.decode()
    assert "Support memories" in page and "Support team" in page  # its data, its name in the navigation
    assert client.get(reverse("api_keys")).status_code == 403  # a reviewer there, not an operator


@pytest.mark.django_db
def test_it_refuses_to_switch_to_a_workspace_one_is_not_in(client, two_teams, operator_user):
    _, other = two_teams
    client.force_login(operator_user)
    assert client.post(reverse("workspace_switch"), {"workspace": other.pk}).status_code == 404
    assert "Support memories" not in client.get(reverse("orbs:bank_list")).content.decode()


@pytest.mark.django_db
def test_an_admin_creates_a_workspace_and_adds_members_only_to_their_own(client, role_admin_user, two_teams):
    person, other = two_teams
    client.force_login(role_admin_user)
    created = client.post(reverse("workspace_create"), {"name": "Research", "slug": "research"})
    research = Workspace.objects.get(slug="research")
    assert created["Location"] == reverse("workspaces")
    assert Membership.objects.filter(workspace=research, user=role_admin_user, role=Role.ADMIN).exists()
    added = client.post(reverse("membership_add"), {"workspace": research.pk, "username": person.username,
                                                     "role": Role.ANNOTATOR})
    assert added.status_code == 302 and person.memberships.filter(workspace=research).exists()
    refused = client.post(reverse("membership_add"), {"workspace": other.pk, "username": person.username,
                                                       "role": Role.ADMIN})
    assert refused.status_code == 400 and not person.memberships.filter(workspace=other, role=Role.ADMIN).exists()
    assert "Support team" not in client.get(reverse("workspaces")).content.decode()


# --- where people and keys land ---
def _landing(user) -> str:
    """The workspace a fresh sign-in of `user` acts in, as its API answers."""
    fresh = Client()
    fresh.force_login(user)
    return fresh.get("/api/me").json()["workspace"]["slug"]


@pytest.mark.django_db
def test_creating_a_workspace_leaves_the_superuser_and_their_new_keys_in_default(client, django_user_model):
    root = django_user_model.objects.create_superuser("root", password="a-long-enough-pass")
    bank_get_or_create(name="Demo memories")  # the demo, in Default
    client.force_login(root)
    assert client.post(reverse("workspace_create"), {"name": "Research", "slug": "research"}).status_code == 302
    assert Membership.objects.filter(workspace__slug="research", user=root).exists()
    assert _landing(root) == DEFAULT_WORKSPACE_SLUG
    assert "Demo memories" in client.get(reverse("orbs:bank_list")).content.decode()
    out = io.StringIO()
    call_command("create_api_key", "root", name="agent", stdout=out)
    assert "in workspace 'default'" in out.getvalue()


@pytest.mark.django_db
def test_a_user_lands_in_the_workspace_they_last_switched_to(client, two_teams):
    person, other = two_teams
    assert _landing(person) == DEFAULT_WORKSPACE_SLUG
    client.force_login(person)
    client.post(reverse("workspace_switch"), {"workspace": other.pk})
    assert _landing(person) == other.slug
    secret = ApiKey.issue(user=person, name="agent")[1]  # no workspace named: where its user lands
    assert Client().get("/api/me", headers={"X-API-Key": secret}).json()["workspace"]["slug"] == other.slug
    Membership.objects.filter(user=person, workspace=other).delete()  # no longer theirs: back to Default
    assert _landing(person) == DEFAULT_WORKSPACE_SLUG


@pytest.mark.django_db
def test_me_shows_the_keys_workspace_and_scopes(client, two_teams):
    person, other = two_teams
    scopes = [scope.value for scope in api_scopes()][:2]
    _, secret = ApiKey.issue(user=person, name="reader", workspace=other, scopes=scopes)
    me = client.get("/api/me", headers={"Authorization": f"Bearer {secret}"}).json()
    assert me == {"username": person.username, "roles": ["reviewer"], "credential": "api_key",
                  "workspace": {"slug": "support", "name": "Support team"}, "key_name": "reader",
                  "key_prefix": secret[:ApiKey.PREFIX_LENGTH], "scopes": sorted(scopes)}
    client.force_login(person)
    session = client.get("/api/me").json()
    assert (session["credential"], session["workspace"]["slug"], session["roles"], session["scopes"]) == (
        "session", DEFAULT_WORKSPACE_SLUG, ["operator"], None)


@pytest.mark.django_db
def test_create_api_key_takes_a_workspace_and_scopes(client, two_teams):
    person, other = two_teams
    scope = api_scopes()[0].value
    out = io.StringIO()
    call_command("create_api_key", person.username, name="support-bot", workspace="support", scopes=[scope], stdout=out)
    secret = out.getvalue().split("key: ")[1].split()[0]
    me = client.get("/api/me", headers={"Authorization": f"Bearer {secret}"}).json()
    assert (me["workspace"]["slug"], me["scopes"]) == ("support", [scope])


@pytest.mark.django_db
@pytest.mark.parametrize(("options", "message"), [
    ({"workspace": "nowhere"}, "--workspace: no workspace 'nowhere'; known: "),
    ({"workspace": "elsewhere"}, "holds no role in 'elsewhere'"),
    ({"scopes": ["memory:everything"]}, "--scope: unknown API scope 'memory:everything'"),
])
def test_create_api_key_names_a_bad_workspace_or_scope(two_teams, options, message):
    person, _ = two_teams
    Workspace.objects.create(slug="elsewhere", name="Elsewhere")
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("create_api_key", person.username, name="bot", **options)
    assert not ApiKey.objects.exists()
