"""The Django admin site shows memories but never changes them: an edit there would skip review,
revisions, the vector and the history chain."""
import pytest
from django import forms
from django.contrib import admin
from django.test import RequestFactory

from orbs.models import MemoryBank, Orb
from orbs.services.history import history_verify
from tests.fixtures.users import PASSWORD


@pytest.fixture
def root(django_user_model):
    return django_user_model.objects.create_superuser("root", password=PASSWORD)


def _form_data(page) -> dict:
    """What the admin's change form would post back unchanged (nothing, where every field is read-only)."""
    form, data = page.context["adminform"].form, {}
    for name, field in form.fields.items():
        value = form[name].value()
        if isinstance(field.widget, forms.MultiWidget):  # a date and a time, posted as name_0 and name_1
            data |= {f"{name}_{part}": _posted(item) for part, item in enumerate(field.widget.decompress(value))}
        else:
            data[name] = _posted(value)
    return data


def _posted(value):
    if isinstance(value, list | tuple):
        return [str(item) for item in value]
    return "" if value is None else value


@pytest.mark.django_db
def test_it_changes_nothing_when_an_admin_post_edits_an_orb(client, root, make_orb):
    orb = make_orb("Where is my parcel?")
    client.force_login(root)
    url = f"/admin/orbs/orb/{orb.pk}/change/"
    page = client.get(url)
    assert page.status_code == 200 and orb.outcome in page.content.decode()
    posted = client.post(url, _form_data(page) | {"outcome": "Always refund at once, whatever the policy says."})
    after = Orb.objects.get(pk=orb.pk)
    assert (after.outcome, after.status, after.version) == (orb.outcome, Orb.Status.APPROVED, orb.version)
    assert history_verify(bank_id=orb.bank_id).ok and posted.status_code == 403


@pytest.mark.django_db
def test_it_keeps_a_banks_approval_policy_out_of_the_admins_reach(client, root, bank):
    client.force_login(root)
    url = f"/admin/orbs/memorybank/{bank.pk}/change/"
    page = client.get(url)
    assert page.status_code == 200
    assert client.post(url, _form_data(page) | {"auto_approve": MemoryBank.AutoApprove.ALWAYS}).status_code == 403
    assert client.post(f"/admin/orbs/memorybank/{bank.pk}/delete/", {"post": "yes"}).status_code == 403
    bank.refresh_from_db()
    assert bank.auto_approve == MemoryBank.AutoApprove.NEVER


@pytest.mark.django_db
def test_it_shows_every_memory_model_in_the_admin_read_only(root):
    """Every model of the memory app the admin site lists, today's and any registered later."""
    request = RequestFactory().get("/admin/")
    request.user = root
    shown = [model_admin for model, model_admin in admin.site._registry.items() if model._meta.app_label == "orbs"]
    assert len(shown) >= 5
    for model_admin in shown:
        assert model_admin.has_view_permission(request), model_admin
        writable = (model_admin.has_add_permission(request), model_admin.has_change_permission(request),
                    model_admin.has_delete_permission(request))
        assert writable == (False, False, False), model_admin
