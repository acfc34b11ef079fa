"""Workspace scoping is the default (memweb.scoping): code in a request, or in a background job, that
never names a workspace still reads only its own; a request acting in none reads nothing; a selector
asked for a workspace's rows without one refuses."""
import pytest
from django.apps import apps
from django.contrib.auth.models import AnonymousUser
from django.http import HttpResponse, StreamingHttpResponse
from django.test import RequestFactory

from evaluation.models import Task, TaskSet
from memweb.jobs import job_execute, job_start
from memweb.models import AdminEvent, Membership, Workspace, WorkspaceLanding
from memweb.roles import Role
from memweb.scoping import AllWorkspacesManager, WorkspaceManager, WorkspaceMissing, workspace_scope
from memweb.workspaces import CurrentWorkspace
from orbs.models import MemoryBank
from orbs.services import bank_get_or_create


@pytest.fixture
def two_banks(db):
    other = Workspace.objects.create(slug="elsewhere", name="Elsewhere")
    ours = bank_get_or_create(name="Ours", workspace=Workspace.objects.get(slug="default"))
    theirs = bank_get_or_create(name="Theirs", workspace=other)
    return ours, theirs


def _bank_names_view(request):
    # Names no workspace: what it sees is the middleware's doing.
    return HttpResponse(",".join(MemoryBank.objects.order_by("name").values_list("name", flat=True)))


def _request_as(user, workspace=None):
    request = RequestFactory().get("/")
    request.user, request.session = user, {}
    if workspace is not None:
        request.session["memweb_workspace"] = workspace.pk
    return request


def test_a_request_reads_only_its_workspace_without_naming_it(two_banks, user_for_role):
    ours, theirs = two_banks
    person = user_for_role(Role.OPERATOR)
    assert CurrentWorkspace(_bank_names_view)(_request_as(person)).content.decode() == "Ours"
    Membership.objects.create(workspace=theirs.workspace, user=person, role=Role.OPERATOR)
    switched = CurrentWorkspace(_bank_names_view)(_request_as(person, theirs.workspace))
    assert switched.content.decode() == "Theirs"


def test_a_request_acting_in_no_workspace_reads_nothing(two_banks):
    assert CurrentWorkspace(_bank_names_view)(_request_as(AnonymousUser())).content == b""


def test_children_are_scoped_through_their_owner(two_banks):
    ours, theirs = two_banks
    task_set = TaskSet.objects.create(workspace=theirs.workspace, name="Their tasks")
    hidden = Task.objects.create(task_set=task_set, external_id="t1", domain="appliances", split="train",
                                 difficulty="easy", spec={}, content_hash="0" * 64)
    with workspace_scope(ours.workspace):
        assert not Task.objects.filter(pk=hidden.pk).exists()
        with pytest.raises(Task.DoesNotExist):
            Task.objects.get(pk=hidden.pk)
        assert not ours.workspace.task_sets.exists() and not task_set.tasks.exists()  # related managers too
    assert Task.objects.filter(pk=hidden.pk).exists()  # outside a request: by id, as handed


def test_the_scope_ends_with_the_request(two_banks):
    CurrentWorkspace(_bank_names_view)(_request_as(AnonymousUser()))
    assert MemoryBank.objects.count() == 2


def test_a_streamed_body_is_read_in_the_requests_workspace(two_banks, user_for_role):
    def streaming_view(request):
        # Each chunk queries when the server reads it, after the middleware has returned.
        return StreamingHttpResponse(bank.name for bank in MemoryBank.objects.order_by("name").iterator())

    response = CurrentWorkspace(streaming_view)(_request_as(user_for_role(Role.OPERATOR)))
    assert b"".join(response.streaming_content) == b"Ours"


def test_a_selector_refuses_a_missing_workspace(two_banks):
    ours, _ = two_banks
    assert list(MemoryBank.objects.of(ours.workspace)) == [ours]
    with pytest.raises(WorkspaceMissing, match="memory banks are read inside a workspace"):
        MemoryBank.objects.of(None)


def test_the_all_workspaces_manager_reads_across_them(two_banks):
    ours, theirs = two_banks
    with workspace_scope(ours.workspace):
        assert set(MemoryBank.all_workspaces.all()) == {ours, theirs}


def test_a_job_reads_only_its_workspace(two_banks, monkeypatch):
    ours, theirs = two_banks
    seen = []
    monkeypatch.setattr("memweb.jobs.job_function", lambda kind: lambda context: seen.extend(
        MemoryBank.objects.values_list("name", flat=True)))
    job = job_start(kind="any", title="names", payload={}, workspace=theirs.workspace)
    job_execute(job_id=job.pk)
    assert seen == ["Theirs"]


def test_every_workspace_owned_model_is_scoped_by_default():
    # Who may enter a workspace is not data it owns: memberships and landings are read per person, and
    # the administration trail per administrator, across the workspaces they administer (memweb.user_admin).
    access_records = {Membership, WorkspaceLanding, AdminEvent}
    owned = [model for model in apps.get_models() if model not in access_records and (
        hasattr(model, "WORKSPACE_PATH")
        or any(field.name == "workspace" and field.related_model is Workspace for field in model._meta.fields))]
    assert len(owned) >= 25
    for model in owned:
        assert isinstance(model._default_manager, WorkspaceManager), model
        assert isinstance(model.all_workspaces, AllWorkspacesManager), model
