"""The e-mails memweb sends: a new account's set-password link and a password reset link. Where
they go is settings.EMAIL_BACKEND (MEMWEB_EMAIL_BACKEND: a folder under the data dir by default, so
nothing is lost on a machine with no mail server). Each names the dashboard by the address it was
asked from, so a reader with several memweb servers knows which one wrote."""
import logging
import smtplib

from django.conf import settings
from django.core.mail import send_mail
from django.template.loader import render_to_string

logger = logging.getLogger(__name__)


def dashboard_name(request) -> str:
    return f"the memweb dashboard at {request.get_host()}"


def password_set_mail_send(*, request, user, link: str) -> str:
    """E-mail `user` their one-time set-password `link`; the reason when it could not be sent, else ""."""
    context = {"user": user, "link": link, "dashboard": dashboard_name(request),
               "inviter": request.user.get_username()}
    subject = f"Your account on {dashboard_name(request)}"
    body = render_to_string("registration/account_created_email.txt", context)
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [user.email])
    except (OSError, smtplib.SMTPException) as failed:
        logger.warning("set-password e-mail to user %s not sent: %s", user.pk, failed)
        return f"the mail server refused it or did not answer ({type(failed).__name__})"
    return ""
