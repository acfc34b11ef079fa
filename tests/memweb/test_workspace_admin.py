"""Workspaces administered in the dashboard (issue 32): a member's role changed on the members page
(taking the admin role away asks first; the last admin stays), workspaces renamed, archived (read-only,
out of the switcher and of landing; the default one never) and unarchived; all audited."""
import re

import pytest
from django.test import Client
from django.urls import reverse

from memweb.models import AdminEvent, ApiKey, Membership, Workspace, default_workspace_id, landing_workspace_id
from memweb.roles import Role
from orbs.models import MemoryBank
from tests.fixtures.users import PASSWORD


@pytest.fixture
def team(user_for_role):
    """A workspace with an admin (signed in by `admin_client`) and an operator."""
    workspace = Workspace.objects.create(slug="team", name="Team")
    return workspace, user_for_role(Role.ADMIN, workspace=workspace), user_for_role(Role.OPERATOR, workspace=workspace)


@pytest.fixture
def admin_client(client, team):
    client.force_login(team[1])
    client.post(reverse("workspace_switch"), {"workspace": team[0].pk})
    return client


def _membership(workspace, user) -> Membership:
    return Membership.objects.get(workspace=workspace, user=user)


@pytest.mark.django_db
def test_a_promotion_applies_at_once(admin_client, team):
    workspace, _, operator = team
    membership = _membership(workspace, operator)
    response = admin_client.post(reverse("membership_role", args=[membership.pk]), {"role": Role.ADMIN}, follow=True)
    assert f"{operator.username} is now admin in “Team”" in response.content.decode()
    membership.refresh_from_db()
    assert membership.role == Role.ADMIN
    event = AdminEvent.objects.get()
    assert (event.action, event.old_role, event.new_role, event.workspace) == (
        AdminEvent.Action.ROLE_CHANGED, Role.OPERATOR, Role.ADMIN, workspace)


@pytest.mark.django_db
def test_a_demotion_asks_for_a_confirmation_first(admin_client, team, user_for_role):
    workspace, _, _ = team
    second_admin = user_for_role(Role.ADMIN, workspace=workspace)
    membership = _membership(workspace, second_admin)
    asked = admin_client.post(reverse("membership_role", args=[membership.pk]), {"role": Role.REVIEWER})
    assert asked.status_code == 200 and "Take the admin role from" in asked.content.decode()
    membership.refresh_from_db()
    assert membership.role == Role.ADMIN and not AdminEvent.objects.exists()
    admin_client.post(reverse("membership_role", args=[membership.pk]), {"role": Role.REVIEWER, "confirmed": "yes"})
    membership.refresh_from_db()
    assert membership.role == Role.REVIEWER


@pytest.mark.django_db
def test_the_last_admin_is_neither_demoted_nor_removed(admin_client, team):
    workspace, admin, _ = team
    membership = _membership(workspace, admin)
    demoted = admin_client.post(reverse("membership_role", args=[membership.pk]),
                                {"role": Role.OPERATOR, "confirmed": "yes"}, follow=True)
    assert f"{admin.username} is the last admin of “Team”: make someone else admin first." in demoted.content.decode()
    removed = admin_client.post(reverse("membership_remove", args=[membership.pk]), follow=True)
    assert "is the last admin of “Team”" in removed.content.decode()
    membership.refresh_from_db()
    assert membership.role == Role.ADMIN and not AdminEvent.objects.exists()


@pytest.mark.django_db
def test_an_inactive_admin_does_not_count_as_another_admin(admin_client, team, user_for_role):
    workspace, admin, _ = team
    asleep = user_for_role(Role.ADMIN, workspace=workspace)
    asleep.is_active = False
    asleep.save()
    admin_client.post(reverse("membership_remove", args=[_membership(workspace, admin).pk]))
    assert Membership.objects.filter(workspace=workspace, user=admin).exists()


@pytest.mark.django_db
def test_roles_of_another_workspace_or_of_a_superuser_are_out_of_reach(admin_client, team, role_admin_user,
                                                                        django_user_model):
    workspace, _, _ = team
    elsewhere = _membership(Workspace.objects.get(pk=default_workspace_id()), role_admin_user)
    assert admin_client.post(reverse("membership_role", args=[elsewhere.pk]), {"role": Role.ANNOTATOR}).status_code == 404
    assert admin_client.post(reverse("membership_remove", args=[elsewhere.pk])).status_code == 404
    root = django_user_model.objects.create_superuser("root", password=PASSWORD)
    rooted = Membership.objects.create(workspace=workspace, user=root, role=Role.OPERATOR)
    refused = admin_client.post(reverse("membership_role", args=[rooted.pk]), {"role": Role.ADMIN}, follow=True)
    assert "managed by superusers only" in refused.content.decode()
    admin_client.post(reverse("membership_remove", args=[rooted.pk]))
    rooted.refresh_from_db()
    assert rooted.role == Role.OPERATOR
    elsewhere.refresh_from_db()
    assert elsewhere.role == Role.ADMIN


@pytest.mark.django_db
def test_an_unknown_role_is_refused_by_name(admin_client, team):
    membership = _membership(team[0], team[2])
    response = admin_client.post(reverse("membership_role", args=[membership.pk]), {"role": "owner"}, follow=True)
    assert "Role: choose one of operator, reviewer, annotator, admin." in response.content.decode()


@pytest.mark.django_db
def test_a_workspace_is_renamed_and_a_taken_name_is_refused_at_the_field(admin_client, team):
    workspace, _, _ = team
    field = f"workspace-{workspace.pk}-name"
    renamed = admin_client.post(reverse("workspace_rename", args=[workspace.pk]), {field: "Support"}, follow=True)
    assert "Workspace “Team” is now “Support”." in renamed.content.decode()
    workspace.refresh_from_db()
    assert workspace.name == "Support" and workspace.slug == "team"
    assert AdminEvent.objects.get().note == "was “Team”"
    Workspace.objects.create(slug="taken", name="Taken")
    taken = admin_client.post(reverse("workspace_rename", args=[workspace.pk]), {field: "Taken"})
    assert taken.status_code == 400 and "already exists" in taken.content.decode()
    assert f'id="id_{field}"' in taken.content.decode()
    workspace.refresh_from_db()
    assert workspace.name == "Support"


@pytest.mark.django_db
def test_the_default_workspace_is_never_archived(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password=PASSWORD))
    default = Workspace.objects.get(pk=default_workspace_id())
    response = client.post(reverse("workspace_archive", args=[default.pk]), follow=True)
    assert "is the default workspace" in response.content.decode() and "cannot be archived" in response.content.decode()
    default.refresh_from_db()
    assert not default.is_archived


@pytest.mark.django_db
def test_an_archived_workspace_is_readable_and_refuses_writes_until_unarchived(admin_client, team):
    workspace, _, operator = team
    admin_client.post(reverse("workspace_archive", args=[workspace.pk]))
    workspace.refresh_from_db()
    assert workspace.is_archived
    assert admin_client.get(reverse("orbs:bank_list")).status_code == 200  # its pages stay readable
    refused = admin_client.post(reverse("orbs:bank_create"), {"name": "New bank"},
                                headers={"Referer": "http://testserver/orbs/banks/"}, follow=True)
    assert "Workspace “Team” is archived: it is read-only" in refused.content.decode()
    assert refused.redirect_chain[-1][0] == "http://testserver/orbs/banks/"
    assert not MemoryBank.all_workspaces.filter(name="New bank").exists()
    session_api = admin_client.post("/api/orbs/banks", {"name": "API bank"}, content_type="application/json")
    assert session_api.status_code == 409 and "is archived" in session_api.json()["detail"]
    secret = ApiKey.issue(user=operator, name="agent", workspace=workspace)[1]
    agent = Client(headers={"Authorization": f"Bearer {secret}"})
    assert agent.get("/api/orbs/banks").status_code == 200
    by_key = agent.post("/api/orbs/banks", {"name": "Key bank"}, content_type="application/json")
    assert by_key.status_code == 409 and by_key.json()["detail"].startswith("Workspace “Team” is archived")
    admin_client.post(reverse("workspace_unarchive", args=[workspace.pk]))
    assert agent.post("/api/orbs/banks", {"name": "Key bank"}, content_type="application/json").status_code == 201
    actions = list(AdminEvent.objects.order_by("pk").values_list("action", flat=True))
    assert actions == [AdminEvent.Action.WORKSPACE_ARCHIVED, AdminEvent.Action.WORKSPACE_UNARCHIVED]


@pytest.mark.django_db
def test_an_archived_workspace_leaves_the_switcher_and_the_landing(client, team):
    workspace, _, operator = team
    client.force_login(operator)
    client.post(reverse("workspace_switch"), {"workspace": workspace.pk})
    assert landing_workspace_id(operator) == workspace.pk
    workspace.archived_at = workspace.created_at
    workspace.save()
    assert landing_workspace_id(operator) == default_workspace_id()
    page = client.get(reverse("home"))
    assert "archived: read-only" in page.content.decode()  # the session still reads it, told so
    other = Client()
    other.force_login(operator)
    assert other.get(reverse("home")).context["current_workspace"] != workspace
    listed = other.get(reverse("home")).context["user_workspaces"]
    assert workspace not in listed


@pytest.mark.django_db
def test_an_admin_renames_or_archives_only_their_own_workspaces(admin_client, team):
    default = Workspace.objects.get(pk=default_workspace_id())
    assert admin_client.post(reverse("workspace_archive", args=[default.pk])).status_code == 404
    assert admin_client.post(reverse("workspace_rename", args=[default.pk]),
                             {f"workspace-{default.pk}-name": "Mine"}).status_code == 404
    default.refresh_from_db()
    assert default.name == "Default" and not default.is_archived


@pytest.mark.django_db
def test_a_key_of_an_open_workspace_writes_even_from_a_session_in_an_archived_one(admin_client, team,
                                                                                    operator_user):
    workspace, _, _ = team
    admin_client.post(reverse("workspace_archive", args=[workspace.pk]))
    secret = ApiKey.issue(user=operator_user, name="agent", workspace=Workspace.objects.get(pk=default_workspace_id()))[1]
    response = admin_client.post("/api/orbs/banks", {"name": "Default bank"}, content_type="application/json",
                                 headers={"Authorization": f"Bearer {secret}"})
    assert response.status_code == 201
    assert MemoryBank.all_workspaces.get(name="Default bank").workspace_id == default_workspace_id()


def _banner(page) -> str:
    found = re.search(r'<div class="archived-banner"[^>]*>(.*?)</div>', page.content.decode(), re.DOTALL)
    return found.group(1) if found else ""


@pytest.mark.django_db
def test_every_page_of_an_archived_workspace_carries_the_banner(admin_client, team):
    workspace, _, operator = team
    assert _banner(admin_client.get(reverse("home"))) == ""
    admin_client.post(reverse("workspace_archive", args=[workspace.pk]))
    unarchive_link = f'href="{reverse("workspaces")}#workspace-{workspace.pk}"'
    for url in (reverse("home"), reverse("orbs:queue"), reverse("orbs:bank_list"), reverse("users"),
                reverse("job_list")):
        banner = _banner(admin_client.get(url))
        assert "Workspace “Team” is archived: read-only." in banner, url
        assert "nothing can be created, changed, started or deleted in it" in banner and unarchive_link in banner
    reader = Client()
    reader.force_login(operator)
    reader.post(reverse("workspace_switch"), {"workspace": workspace.pk})
    banner = _banner(reader.get(reverse("home")))
    assert "is archived: read-only." in banner and "An admin of it can unarchive it" in banner
    assert unarchive_link not in banner  # an operator cannot unarchive: no link to a page they may not open
    admin_client.post(reverse("workspace_unarchive", args=[workspace.pk]))
    assert _banner(admin_client.get(reverse("home"))) == ""


@pytest.mark.django_db
def test_the_members_page_pages_searches_and_filters_one_workspace(admin_client, team, user_for_role):
    workspace, admin, operator = team
    for number in range(26):
        user_for_role(Role.ANNOTATOR, username=f"crowd{number:02d}", workspace=workspace)
    outsider = user_for_role(Role.ANNOTATOR, username="crowd-elsewhere")  # the default workspace's
    operator.email = "ops@example.org"
    operator.is_active = False
    operator.save()
    url = reverse("workspace_members", args=[workspace.pk])

    first = admin_client.get(url).context["page"]
    assert first.paginator.count == 28 and len(first.object_list) == 25
    second = admin_client.get(url, {"page": 2}).context["page"]
    assert [m.user.username for m in second.object_list] == ["crowd24", "crowd25", operator.username]  # admin… sorts first
    crowd = admin_client.get(url, {"q": "crowd", "role": Role.ANNOTATOR}).context["page"]
    assert crowd.paginator.count == 26 and outsider.username not in {m.user.username for m in crowd.object_list}
    by_mail = admin_client.get(url, {"q": "ops@example"}).context["page"].object_list
    inactive = admin_client.get(url, {"status": "inactive"}).context["page"].object_list
    assert [m.user for m in by_mail] == [operator] and [m.user for m in inactive] == [operator]
    rows = admin_client.get(url, {"role": Role.ADMIN}, headers={"HX-Request": "true"})
    assert rows.templates[0].name == "memweb/_member_rows.html" and admin.username in rows.content.decode()
    assert "No members match" in admin_client.get(url, {"q": "nobody-at-all"}).content.decode()
    listed = admin_client.get(reverse("workspaces")).content.decode()
    assert f'href="{url}"' in listed and "28 members." in listed


@pytest.mark.django_db
def test_a_member_change_returns_to_the_list_it_was_made_from(admin_client, team):
    workspace, _, operator = team
    back = reverse("workspace_members", args=[workspace.pk]) + "?q=operator&page=1"
    changed = admin_client.post(reverse("membership_role", args=[_membership(workspace, operator).pk]),
                                {"role": Role.REVIEWER, "back": back})
    assert changed["Location"] == back
    elsewhere = admin_client.post(reverse("membership_remove", args=[_membership(workspace, operator).pk]),
                                  {"back": "https://elsewhere.example/"})
    assert elsewhere["Location"] == reverse("workspace_members", args=[workspace.pk])  # never off the site


@pytest.mark.django_db
def test_another_workspaces_members_page_is_a_404(admin_client):
    other = Workspace.objects.create(slug="other", name="Other")
    assert admin_client.get(reverse("workspace_members", args=[other.pk])).status_code == 404
