"""Workspaces from a person's side: roles held per workspace, the switcher in the navigation, and
the admins' page that creates workspaces and manages their members."""
import pytest
from django.urls import reverse

from memweb.models import Membership, Workspace
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
