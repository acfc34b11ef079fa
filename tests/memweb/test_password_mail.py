"""E-mail for accounts (issue 32): a new user's set-password link is e-mailed to them, and "Forgot
your password?" sends a reset link; the reset page answers the same whether or not the address has
an account, and is limited per client address and per e-mail address. Tests run with Django's
in-memory mail backend (mail.outbox)."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from django.urls import reverse

from memweb.models import default_workspace_id
from memweb.roles import Role
from tests.support.processes import subprocess_env

NEW_PASSWORD = "a-fresh-and-long-passphrase"
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


def _invite(client, **changes):
    data = {"username": "newcomer", "email": "new@example.org", "workspace": default_workspace_id(),
            "role": Role.REVIEWER, "sign_in": "link"}
    return client.post(reverse("user_create"), {**data, **changes})


def _mailed_link(message) -> str:
    return re.search(r"^https?://\S+$", message.body, re.MULTILINE).group(0)


def _without_csrf_token(response) -> str:
    """The page as the user reads it: each response carries a fresh CSRF token."""
    return re.sub(r'"X-CSRFToken": "[^"]+"', "", response.content.decode())


def _signs_in(username: str, password: str) -> bool:
    return Client().post(reverse("login"), {"username": username, "password": password}).status_code == 302


def _choose_password(link: str, password: str):
    """Open an e-mailed link in a fresh browser session and choose `password` on the page it leads to."""
    visitor = Client()
    form_page = visitor.get(link, follow=True)
    assert form_page.status_code == 200 and 'name="new_password1"' in form_page.content.decode()
    return visitor.post(form_page.redirect_chain[-1][0], {"new_password1": password, "new_password2": password},
                        follow=True)


def test_a_new_user_is_mailed_their_set_password_link_which_lets_them_sign_in(client, role_admin_user):
    client.force_login(role_admin_user)
    page = _invite(client).content.decode()
    assert "memweb e-mailed this link to" in page and "new@example.org" in page
    [message] = mail.outbox
    assert message.to == ["new@example.org"]
    assert message.subject == "Your account on the memweb dashboard at testserver"
    assert role_admin_user.username in message.body and "Your username: newcomer" in message.body
    link = _mailed_link(message)
    assert link in page  # the same link, shown once to the admin too
    done = _choose_password(link, NEW_PASSWORD)
    assert "Your password is set: sign in with it." in done.content.decode()
    assert _signs_in("newcomer", NEW_PASSWORD)


def test_a_user_without_an_address_gets_no_mail_and_their_link_is_shown(client, role_admin_user):
    client.force_login(role_admin_user)
    page = _invite(client, email="").content.decode()
    assert mail.outbox == [] and 'id="set-password-link"' in page and "e-mailed" not in page


def test_a_mail_server_that_refuses_leaves_the_account_and_shows_the_link(client, role_admin_user, monkeypatch):
    def refused(*args, **kwargs):
        raise ConnectionRefusedError("no mail server here")
    monkeypatch.setattr("memweb.mail.send_mail", refused)
    client.force_login(role_admin_user)
    page = _invite(client).content.decode()
    assert "The e-mail to new@example.org was not sent" in page and "ConnectionRefusedError" in page
    assert 'id="set-password-link"' in page and get_user_model().objects.filter(username="newcomer").exists()


def test_the_login_page_offers_a_password_reset():
    page = Client().get(reverse("login")).content.decode()
    assert f'href="{reverse("password_reset")}"' in page and "Forgot your password?" in page


def test_a_reset_link_changes_the_password_once(django_user_model):
    django_user_model.objects.create_user("forgetful", email="Forgetful@Example.org", password="an-old-passphrase-1")
    asked = Client().post(reverse("password_reset"), {"email": "forgetful@example.org"}, follow=True)
    assert asked.redirect_chain[-1][0] == reverse("password_reset_done")
    [message] = mail.outbox
    assert message.to == ["Forgetful@example.org"]  # as stored: create_user lower-cases the domain
    assert message.subject == "Reset your password on the memweb dashboard at testserver"
    assert "Your username: forgetful" in message.body
    link = _mailed_link(message)
    done = _choose_password(link, NEW_PASSWORD)
    assert done.redirect_chain[-1][0] == reverse("login")
    assert "Your password is changed: sign in with it." in done.content.decode()
    assert _signs_in("forgetful", NEW_PASSWORD) and not _signs_in("forgetful", "an-old-passphrase-1")
    again = Client().get(link, follow=True).content.decode()
    assert "This reset link has been used already or has lapsed." in again


def test_an_invited_user_who_never_chose_a_password_can_reset_it(django_user_model):
    django_user_model.objects.create_user("invited", email="invited@example.org", password=None)
    Client().post(reverse("password_reset"), {"email": "invited@example.org"})
    assert [message.to for message in mail.outbox] == [["invited@example.org"]]


def test_an_unknown_or_inactive_address_gets_the_same_answer_and_no_mail(django_user_model):
    sleeper = django_user_model.objects.create_user("sleeper", email="sleeper@example.org", password="a-passphrase-2")
    sleeper.is_active = False
    sleeper.save()
    django_user_model.objects.create_user("known", email="known@example.org", password="a-passphrase-3")
    answers = [Client().post(reverse("password_reset"), {"email": email}, follow=True)
               for email in ("nobody@example.org", "sleeper@example.org", "known@example.org")]
    assert [message.to for message in mail.outbox] == [["known@example.org"]]
    assert {answer.redirect_chain[-1][0] for answer in answers} == {reverse("password_reset_done")}
    assert len({_without_csrf_token(answer) for answer in answers}) == 1  # nothing else tells them apart
    assert "If an active account has that e-mail address" in answers[0].content.decode()


def test_a_bad_address_is_refused_at_the_field():
    page = Client().post(reverse("password_reset"), {"email": "not an address"})
    assert page.status_code == 200 and "Enter a valid email address." in page.content.decode() and not mail.outbox


def test_reset_requests_are_limited_per_client_address(django_user_model, settings):
    settings.MEMWEB_AUTH_MAX_FAILURES = 3
    django_user_model.objects.create_user("known", email="known@example.org", password="a-passphrase-3")
    answers = [Client().post(reverse("password_reset"), {"email": f"someone{number}@example.org"}).status_code
               for number in range(3)]
    assert answers == [302, 302, 302]
    refused = Client().post(reverse("password_reset"), {"email": "known@example.org"})
    assert refused.status_code == 429 and "Too many reset requests" in refused.content.decode()
    assert mail.outbox == []


def test_reset_requests_are_limited_per_e_mail_address(django_user_model, settings):
    settings.MEMWEB_AUTH_MAX_FAILURES = 2
    django_user_model.objects.create_user("known", email="known@example.org", password="a-passphrase-3")
    addresses = ("10.0.0.1", "10.0.0.2", "10.0.0.3")
    answers = [Client(REMOTE_ADDR=address).post(reverse("password_reset"), {"email": "Known@example.org"}).status_code
               for address in addresses]
    assert answers == [302, 302, 429] and len(mail.outbox) == 2


SETTINGS_PROBE = ("import json; from django.conf import settings as s; "
                  "print(json.dumps([s.EMAIL_BACKEND, str(s.EMAIL_FILE_PATH), s.EMAIL_HOST, s.EMAIL_PORT, "
                  "s.EMAIL_USE_TLS, s.DEFAULT_FROM_EMAIL]))")


def _settings_read(**env: str) -> subprocess.CompletedProcess:
    """The e-mail settings a fresh process reads from `env` (and no MEMWEB_EMAIL_* of this one's)."""
    inherited = {name: value for name, value in subprocess_env().items() if not name.startswith("MEMWEB_EMAIL_")}
    env = {**inherited, "DJANGO_SETTINGS_MODULE": "memweb.settings", "DATABASE_URL": "postgresql://db.invalid/memweb",
           "MEMWEB_DATA_DIR": "/tmp/memweb-mail-settings", **env}
    return subprocess.run([sys.executable, "-c", SETTINGS_PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def test_mail_goes_to_a_file_in_the_data_dir_unless_smtp_is_configured():
    default = _settings_read()
    assert default.returncode == 0, default.stderr
    backend, path, *_ = json.loads(default.stdout)
    assert backend == "django.core.mail.backends.filebased.EmailBackend"
    assert path == "/tmp/memweb-mail-settings/mail"
    smtp = _settings_read(MEMWEB_EMAIL_BACKEND="smtp", MEMWEB_EMAIL_HOST="mail.example.org", MEMWEB_EMAIL_PORT="587",
                          MEMWEB_EMAIL_STARTTLS="true", MEMWEB_EMAIL_FROM="memweb <memweb@example.org>")
    assert smtp.returncode == 0, smtp.stderr
    assert json.loads(smtp.stdout) == ["django.core.mail.backends.smtp.EmailBackend", "/tmp/memweb-mail-settings/mail",
                                       "mail.example.org", 587, True, "memweb <memweb@example.org>"]
    both = _settings_read(MEMWEB_EMAIL_STARTTLS="true", MEMWEB_EMAIL_SSL="true")
    assert both.returncode != 0 and "MEMWEB_EMAIL_STARTTLS and MEMWEB_EMAIL_SSL exclude each other" in both.stderr
    typo = _settings_read(MEMWEB_EMAIL_BACKEND="sendmail")
    assert typo.returncode != 0 and "MEMWEB_EMAIL_BACKEND='sendmail' is not accepted" in typo.stderr
