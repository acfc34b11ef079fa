"""The "Forgot your password?" pages: Django's password-reset views with our pages and e-mail. The page says
the same whether or not the address has an account (no one learns who is registered from it), and
the requests from one client address, or for one e-mail address, are limited as sign-ins are
(memweb.auth.reset_requests_over_limit)."""
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import PasswordResetForm
from django.contrib.auth.views import PasswordResetConfirmView, PasswordResetDoneView, PasswordResetView
from django.urls import reverse_lazy

from memweb.auth import reset_requests_over_limit
from memweb.mail import dashboard_name


class ResetRequestForm(PasswordResetForm):
    def get_users(self, email):
        """Every active account with this address, including one that never chose a password: an
        invited user who lost their set-password e-mail resets it the same way."""
        return get_user_model()._default_manager.filter(email__iexact=email, is_active=True).exclude(email="")


class ResetRequest(PasswordResetView):
    form_class = ResetRequestForm
    template_name = "registration/password_reset_form.html"
    email_template_name = "registration/password_reset_email.txt"
    subject_template_name = "registration/password_reset_subject.txt"
    success_url = reverse_lazy("password_reset_done")

    def form_valid(self, form):
        if reset_requests_over_limit(self.request, form.cleaned_data["email"]):
            return self.render_to_response(self.get_context_data(form=form, blocked=True), status=429)
        self.extra_email_context = {"dashboard": dashboard_name(self.request)}
        return super().form_valid(form)


class ResetRequested(PasswordResetDoneView):
    template_name = "registration/password_reset_done.html"


class ResetConfirm(PasswordResetConfirmView):
    """The e-mailed link: Django moves its token into the session before showing the form."""
    template_name = "registration/password_reset_confirm.html"
    success_url = reverse_lazy("login")

    def form_valid(self, form):
        messages.success(self.request, "Your password is changed: sign in with it.")
        return super().form_valid(form)
