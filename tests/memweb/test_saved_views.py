"""Saved views (issue 18): a user names a list's filters, opens, renames and deletes them; nobody
else sees or touches them."""
import pytest
from django.urls import reverse

from memweb.models import SavedView

LIST = "evaluation:episode_list"


@pytest.fixture
def saved(client, operator_user):
    client.force_login(operator_user)
    response = client.post(reverse("saved_view_save"), {"list_name": LIST, "name": " failing refunds ",
                                                        "query": "?outcome=failure&task=refund&page=3"})
    view = SavedView.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse(LIST) + "?outcome=failure&task=refund"
    return view


def test_it_saves_a_view_without_its_page_and_lists_it_on_that_list_only(client, saved):
    assert (saved.name, saved.query) == ("failing refunds", "outcome=failure&task=refund")
    page = client.get(reverse(LIST)).content.decode()
    assert f'href="{reverse(LIST)}?outcome=failure&amp;task=refund">failing refunds</a>' in page
    assert "failing refunds</a>" not in client.get(reverse("evaluation:run_list")).content.decode()


def test_other_users_never_see_open_rename_or_delete_it(client, saved, user_for_role):
    client.force_login(user_for_role("operator"))
    assert "failing refunds</a>" not in client.get(reverse(LIST)).content.decode()
    assert client.post(reverse("saved_view_rename", args=[saved.pk]), {"name": "mine"}).status_code == 404
    assert client.post(reverse("saved_view_delete", args=[saved.pk])).status_code == 404
    assert SavedView.objects.get().name == "failing refunds"


def test_it_renames_and_deletes_its_own_view(client, saved):
    response = client.post(reverse("saved_view_rename", args=[saved.pk]), {"name": "refund failures", "query": "task=x"},
                           follow=True)
    assert "Renamed the view “failing refunds” to “refund failures”." in response.content.decode()
    assert response.redirect_chain[-1][0] == reverse(LIST) + "?task=x"
    response = client.post(reverse("saved_view_delete", args=[saved.pk]), follow=True)
    assert "Deleted the view “refund failures”." in response.content.decode() and not SavedView.objects.exists()


def test_bad_input_is_refused_with_a_page_message(client, saved):
    duplicate = client.post(reverse("saved_view_save"), {"list_name": LIST, "name": "failing refunds", "query": ""},
                            follow=True)
    assert "You already have a view named “failing refunds” on this list." in duplicate.content.decode()
    blank = client.post(reverse("saved_view_save"), {"list_name": LIST, "name": "  ", "query": ""}, follow=True)
    assert "Give the view a name." in blank.content.decode()
    nowhere = client.post(reverse("saved_view_save"), {"list_name": "nowhere:list", "name": "x"}, follow=True)
    assert "is not a list page" in nowhere.content.decode()
    rename = client.post(reverse("saved_view_rename", args=[saved.pk]), {"name": ""}, follow=True)
    assert "was not renamed: give it a name" in rename.content.decode()
    assert list(SavedView.objects.values_list("name", flat=True)) == ["failing refunds"]
