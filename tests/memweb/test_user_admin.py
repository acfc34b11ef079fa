"""The users page (issue 32): admins create accounts (a password or a one-time link), list them with
search, a status filter and pages, deactivate and reactivate them; a workspace admin reaches only
the people of the workspaces they administer, never a superuser, and nobody becomes superuser here.
Every change is in the audit trail shown on the page."""
import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from memweb.models import AdminEvent, ApiKey, Membership, Workspace, default_workspace_id
from memweb.roles import Role
from tests.fixtures.users import PASSWORD

NEW_PASSWORD = "a-fresh-and-long-passphrase"


def _new_user(client, **changes):
    data = {"username": "newcomer", "email": "new@example.org", "workspace": default_workspace_id(),
            "role": Role.REVIEWER, "sign_in": "password", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD}
    return client.post(reverse("user_create"), {**data, **changes})


def _signs_in(username: str, password: str) -> bool:
    return Client().post(reverse("login"), {"username": username, "password": password}).status_code == 302


@pytest.fixture
def other_team(user_for_role):
    """A workspace the default workspace's admin does not administer, with its own admin and member."""
    team = Workspace.objects.create(slug="other-team", name="Other team")
    return team, user_for_role(Role.ADMIN, workspace=team), user_for_role(Role.OPERATOR, workspace=team)


@pytest.mark.django_db
def test_an_admin_creates_a_user_with_a_password_who_can_sign_in(client, role_admin_user):
    client.force_login(role_admin_user)
    response = _new_user(client, is_superuser="on", is_staff="on")
    assert response.status_code == 302 and response["Location"] == reverse("users")
    user = get_user_model().objects.get(username="newcomer")
    assert not user.is_superuser and not user.is_staff and user.email == "new@example.org"
    assert list(Membership.objects.filter(user=user).values_list("role", flat=True)) == [Role.REVIEWER]
    assert _signs_in("newcomer", NEW_PASSWORD)
    event = AdminEvent.objects.get(action=AdminEvent.Action.USER_CREATED)
    assert (event.actor, event.target_user, event.new_role) == (role_admin_user, user, Role.REVIEWER)
    page = client.get(reverse("users")).content.decode()
    assert "created user newcomer" in page


@pytest.mark.django_db
@pytest.mark.parametrize(("changes", "field", "message"), [
    ({"password1": "password", "password2": "password"}, "password1", "This password is too common"),
    ({"password2": "something-else-entirely"}, "password2", "The two passwords differ"),
    ({"password1": "", "password2": ""}, "password1", "Type the initial password"),
    ({"username": "has space"}, "username", "Enter a valid username"),
])
def test_it_refuses_a_bad_new_user_at_the_field_and_writes_nothing(client, role_admin_user, changes, field, message):
    client.force_login(role_admin_user)
    response = _new_user(client, **changes)
    assert response.status_code == 400
    form = response.context["create_form"]
    assert any(message in error for error in form.errors[field]), form.errors
    assert message in response.content.decode() and "problem" in response.content.decode()  # the summary
    assert not get_user_model().objects.filter(username__in=["newcomer", "has space"]).exists()
    assert not AdminEvent.objects.exists()


@pytest.mark.django_db
def test_it_refuses_a_taken_username_whatever_its_case(client, role_admin_user, operator_user):
    client.force_login(role_admin_user)
    response = _new_user(client, username=operator_user.username.upper())
    assert response.status_code == 400 and "exists already" in response.context["create_form"].errors["username"][0]


@pytest.mark.django_db
def test_a_one_time_link_lets_the_new_user_choose_their_password_once(client, role_admin_user):
    client.force_login(role_admin_user)
    response = _new_user(client, sign_in="link", password1="", password2="")
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    link = re.search(r'id="set-password-link">([^<]+)<', response.content.decode()).group(1)
    user = get_user_model().objects.get(username="newcomer")
    assert not user.has_usable_password()
    visitor = Client()
    form_page = visitor.get(link, follow=True)
    assert "Choose your password" in form_page.content.decode()
    weak = visitor.post(form_page.redirect_chain[-1][0], {"new_password1": "123", "new_password2": "123"})
    assert weak.status_code == 200 and "too short" in weak.content.decode()
    done = visitor.post(form_page.redirect_chain[-1][0], {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert done.status_code == 302 and done["Location"] == reverse("login")
    assert _signs_in("newcomer", NEW_PASSWORD)
    again = Client().get(link, follow=True)
    assert "has been used already or has lapsed" in again.content.decode()


@pytest.mark.django_db
def test_the_list_searches_filters_by_status_and_pages(client, user_for_role, role_admin_user):
    for number in range(30):
        user_for_role(Role.ANNOTATOR, username=f"crowd{number:02d}")
    sleeper = user_for_role(Role.OPERATOR, username="sleeper")
    sleeper.is_active = False
    sleeper.save()
    client.force_login(role_admin_user)
    first = client.get(reverse("users"), {"q": "crowd"})
    assert len(first.context["page"].object_list) == 25 and first.context["page"].paginator.count == 30
    second = client.get(reverse("users"), {"q": "crowd", "page": 2}).context["page"]
    assert [user.username for user in second.object_list] == [f"crowd{number}" for number in range(25, 30)]
    inactive = client.get(reverse("users"), {"status": "inactive"}).context["page"].object_list
    assert [user.username for user in inactive] == ["sleeper"]
    rows = client.get(reverse("users"), {"q": "sleeper"}, headers={"HX-Request": "true"})
    assert rows.templates[0].name == "memweb/_user_rows.html" and "inactive" in rows.content.decode()
    empty = client.get(reverse("users"), {"q": "nobody-at-all"}).content.decode()
    assert "No users match" in empty


@pytest.mark.django_db
def test_deactivating_locks_the_user_out_of_sign_in_sessions_and_keys(client, role_admin_user, operator_user):
    secret = ApiKey.issue(user=operator_user, name="agent")[1]
    session = Client()
    session.force_login(operator_user)
    client.force_login(role_admin_user)
    response = client.post(reverse("user_deactivate", args=[operator_user.pk]), follow=True)
    assert "is deactivated" in response.content.decode()
    assert not _signs_in(operator_user.username, PASSWORD)
    assert session.get(reverse("home"))["Location"].startswith(reverse("login"))  # the open session ended
    refused = Client().get("/api/me", headers={"Authorization": f"Bearer {secret}"})
    assert refused.status_code == 401 and refused.json() == {"detail": "Invalid or revoked API key"}
    client.post(reverse("user_reactivate", args=[operator_user.pk]))
    assert _signs_in(operator_user.username, PASSWORD)
    assert Client().get("/api/me", headers={"Authorization": f"Bearer {secret}"}).status_code == 200
    actions = list(AdminEvent.objects.order_by("pk").values_list("action", flat=True))
    assert actions == [AdminEvent.Action.USER_DEACTIVATED, AdminEvent.Action.USER_REACTIVATED]


@pytest.mark.django_db
def test_a_workspace_admin_reaches_only_the_people_of_their_workspaces(client, role_admin_user, operator_user,
                                                                       other_team, django_user_model):
    team, team_admin, team_member = other_team
    client.force_login(role_admin_user)
    listed = {user.username for user in client.get(reverse("users")).context["page"].object_list}
    assert operator_user.username in listed and team_member.username not in listed
    assert client.post(reverse("user_deactivate", args=[team_member.pk])).status_code == 404
    assert client.post(reverse("user_deactivate", args=[team_admin.pk])).status_code == 404
    team_member.refresh_from_db()
    assert team_member.is_active
    refused = _new_user(client, workspace=team.pk)
    assert refused.status_code == 400 and "workspace" in refused.context["create_form"].errors


@pytest.mark.django_db
def test_nobody_in_a_workspace_they_do_not_administer_is_deactivated_by_its_neighbour(client, role_admin_user,
                                                                                     operator_user, other_team):
    team, _, _ = other_team
    Membership.objects.create(workspace=team, user=operator_user, role=Role.REVIEWER)
    client.force_login(role_admin_user)
    page = client.get(reverse("users")).content.decode()
    assert "belongs to workspaces you do not administer" in page
    response = client.post(reverse("user_deactivate", args=[operator_user.pk]), follow=True)
    assert "belongs to workspaces you do not administer" in response.content.decode()
    operator_user.refresh_from_db()
    assert operator_user.is_active and not AdminEvent.objects.exists()


@pytest.mark.django_db
def test_a_workspace_admin_never_touches_a_superuser_or_themselves(client, role_admin_user, django_user_model):
    root = django_user_model.objects.create_superuser("root", password=PASSWORD)
    Membership.objects.create(workspace_id=default_workspace_id(), user=root, role=Role.OPERATOR)
    client.force_login(role_admin_user)
    for target in (root, role_admin_user):
        response = client.post(reverse("user_deactivate", args=[target.pk]), follow=True)
        assert response.status_code == 200
        target.refresh_from_db()
        assert target.is_active and target.is_superuser == (target == root)
    assert "managed by superusers only" in client.get(reverse("users")).content.decode()


@pytest.mark.django_db
def test_a_superuser_manages_anyone_but_themselves(client, django_user_model, other_team):
    _, _, team_member = other_team
    root = django_user_model.objects.create_superuser("root", password=PASSWORD)
    client.force_login(root)
    client.post(reverse("user_deactivate", args=[team_member.pk]))
    client.post(reverse("user_deactivate", args=[root.pk]))
    team_member.refresh_from_db()
    root.refresh_from_db()
    assert not team_member.is_active and root.is_active


@pytest.mark.django_db
def test_the_last_admin_of_a_workspace_is_not_deactivated(client, django_user_model, other_team):
    _, team_admin, _ = other_team
    root = django_user_model.objects.create_superuser("root", password=PASSWORD)
    client.force_login(root)
    response = client.post(reverse("user_deactivate", args=[team_admin.pk]), follow=True)
    assert "is the last admin of Other team" in response.content.decode()
    team_admin.refresh_from_db()
    assert team_admin.is_active


@pytest.mark.django_db
def test_the_audit_shows_an_admin_only_their_workspaces_events(client, role_admin_user, operator_user, other_team,
                                                               django_user_model):
    team, _, team_member = other_team
    root = django_user_model.objects.create_superuser("root", password=PASSWORD)
    root_client = Client()
    root_client.force_login(root)
    root_client.post(reverse("user_deactivate", args=[team_member.pk]))
    root_client.post(reverse("workspace_rename", args=[team.pk]), {f"workspace-{team.pk}-name": "Hidden team"})
    client.force_login(role_admin_user)
    client.post(reverse("user_deactivate", args=[operator_user.pk]))
    events = list(client.get(reverse("users")).context["events"])
    assert [(event.action, event.target_user) for event in events] == [(AdminEvent.Action.USER_DEACTIVATED,
                                                                        operator_user)]
    assert len(root_client.get(reverse("users")).context["events"]) == 3


@pytest.mark.django_db
@pytest.mark.parametrize("role", [Role.OPERATOR, Role.REVIEWER, Role.ANNOTATOR])
def test_only_admins_open_the_users_page(client, user_for_role, role):
    client.force_login(user_for_role(role))
    assert client.get(reverse("users")).status_code == 403
    assert _new_user(client).status_code == 403


@pytest.mark.django_db
def test_the_list_filters_by_a_role_held_in_the_admins_workspaces(client, user_for_role, role_admin_user, other_team):
    reviewer = user_for_role(Role.REVIEWER, username="rita")
    _, _, their_operator = other_team
    Membership.objects.create(workspace_id=default_workspace_id(), user=their_operator, role=Role.ANNOTATOR)
    client.force_login(role_admin_user)
    reviewers = client.get(reverse("users"), {"role": Role.REVIEWER}).context["page"].object_list
    # their_operator is an operator only in a workspace this admin does not administer: not listed as one
    operators = client.get(reverse("users"), {"role": Role.OPERATOR}).context["page"].object_list
    assert list(reviewers) == [reviewer] and list(operators) == []
    assert "No users match" in client.get(reverse("users"), {"role": Role.OPERATOR}).content.decode()
