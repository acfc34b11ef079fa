"""API keys with an expiry date (issue 32): set when the key is created (on the keys page or with
`create_api_key --expires`), refused after its last day with a 401 that says so, and listed as expired."""
import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from memweb.models import ApiKey


def _me(secret: str):
    return Client().get("/api/me", headers={"Authorization": f"Bearer {secret}"})


@pytest.mark.django_db
def test_a_key_works_through_its_last_day_and_is_refused_after_it_naming_the_expiry(operator_user):
    today = timezone.localdate()
    key, secret = ApiKey.issue(user=operator_user, name="short-lived", expires_on=today)
    assert _me(secret).status_code == 200
    key.expires_on = today - timedelta(days=1)
    key.save()
    refused = _me(secret)
    assert refused.status_code == 401
    assert refused.json() == {"detail": f"This API key expired at the end of {key.expires_on.isoformat()}: "
                                        "ask for a new key"}


@pytest.mark.django_db
def test_a_key_without_expiry_keeps_working(operator_user):
    key, secret = ApiKey.issue(user=operator_user, name="forever")
    assert key.expires_on is None and key.is_active and _me(secret).status_code == 200


@pytest.mark.django_db
def test_the_keys_page_creates_a_key_with_an_expiry_and_lists_expired_keys(client, operator_user):
    client.force_login(operator_user)
    day = timezone.localdate() + timedelta(days=30)
    created = client.post(reverse("api_key_create"), {"name": "agent", "scopes": ["memory:read"],
                                                      "expires_on": day.isoformat()})
    assert created.status_code == 200
    assert ApiKey.objects.get(name="agent").expires_on == day
    old = ApiKey.issue(user=operator_user, name="old agent")[0]
    old.expires_on = timezone.localdate() - timedelta(days=2)
    old.save()
    page = client.get(reverse("api_keys")).content.decode()
    row = page[page.index("old agent"):]
    row = row[:row.index("</tr>")]
    assert ">expired<" in row and old.expires_on.isoformat() in row
    assert "Revoke" in row  # an expired key can still be revoked for good


@pytest.mark.django_db
@pytest.mark.parametrize(("value", "message"), [
    ("2001-01-01", "This day has passed: choose today or a later day."),
    ("next week", "Enter a date as YYYY-MM-DD."),
])
def test_the_keys_page_refuses_a_bad_expiry_at_the_field(client, operator_user, value, message):
    client.force_login(operator_user)
    response = client.post(reverse("api_key_create"), {"name": "agent", "scopes": ["memory:read"],
                                                       "expires_on": value})
    assert response.status_code == 400 and response.context["form"].errors["expires_on"] == [message]
    assert message in response.content.decode() and not ApiKey.objects.filter(name="agent").exists()


@pytest.mark.django_db
def test_the_command_issues_a_key_with_an_expiry_and_refuses_a_bad_one(operator_user):
    day = timezone.localdate() + timedelta(days=7)
    out = io.StringIO()
    call_command("create_api_key", operator_user.username, "--name", "cron", "--expires", day.isoformat(), stdout=out)
    assert ApiKey.objects.get(name="cron").expires_on == day and f"working through {day.isoformat()}" in out.getvalue()
    for bad, message in (("2001-01-01", "has passed"), ("soon", "is not a date")):
        with pytest.raises(CommandError, match=message):
            call_command("create_api_key", operator_user.username, "--name", "late", "--expires", bad)
    assert not ApiKey.objects.filter(name="late").exists()
