"""The users page: workspace admins and superusers list, create, deactivate and reactivate accounts,
and read the audit trail; the one-time set-password link a new account may be given instead of a
password. Who may manage whom is memweb.user_admin's rule."""
from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.forms import SetPasswordForm
from django.contrib.auth.tokens import default_token_generator
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.db.models import Prefetch, Q
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlencode, urlsafe_base64_decode, urlsafe_base64_encode
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from memweb import user_admin
from memweb.listing import Sorting, sorted_page
from memweb.mail import password_set_mail_send
from memweb.models import Membership
from memweb.roles import Role, role_required
from memweb.user_admin import AdminRefused, manage_refusals, users_visible_to, workspaces_administered
from memweb.views import render_uncached

USER_SORTING = Sorting(columns={"username": "username", "joined": "date_joined", "last_login": "last_login"})
AUDIT_SHOWN = 20
LINK_SESSION_KEY = "memweb_password_link"


class UserFilterForm(forms.Form):
    q = forms.CharField(required=False, label="Search", widget=forms.TextInput(attrs={"type": "search"}),
                        help_text="Part of a username or an email address.")
    role = forms.ChoiceField(required=False, label="Role", choices=[("", "Any role"), *Role.choices],
                             help_text="Held in a workspace you administer.")
    status = forms.ChoiceField(required=False, label="Status",
                               choices=[("", "Active and inactive"), ("active", "Active"), ("inactive", "Inactive")])

    def __init__(self, *args, **kwargs):
        # Its own ids: the page's create form has a `role` field too, and a label finds its field by id.
        super().__init__(*args, auto_id="filter-%s", **kwargs)

    def filtered(self, users, *, administered):
        if not self.is_valid():
            return users
        if query := self.cleaned_data["q"].strip():
            users = users.filter(Q(username__icontains=query) | Q(email__icontains=query))
        if role := self.cleaned_data["role"]:
            # A role held in another team's workspace is not the viewer's business, nor shown in the row.
            held = Membership.objects.filter(role=role, workspace__in=administered).values("user_id")
            users = users.filter(pk__in=held)
        if status := self.cleaned_data["status"]:
            users = users.filter(is_active=status == "active")
        return users


class UserCreateForm(forms.Form):
    PASSWORD, LINK = "password", "link"

    username = forms.CharField(max_length=150, validators=[UnicodeUsernameValidator()],
                               help_text="Letters, digits and @ . + - _ only.")
    email = forms.EmailField(required=False, help_text="Optional: the one-time link is e-mailed there too.")
    workspace = forms.ModelChoiceField(queryset=None, help_text="Where the new user works first.",
                                       error_messages={"required": "Choose the workspace the user starts in."})
    role = forms.ChoiceField(choices=Role.choices, initial=Role.OPERATOR)
    sign_in = forms.ChoiceField(
        label="First sign-in", widget=forms.RadioSelect, initial=LINK,
        choices=[(LINK, "Give them a one-time link to choose their own password"),
                 (PASSWORD, "Set an initial password now")])
    password1 = forms.CharField(label="Initial password", required=False, strip=False,
                                widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}))
    password2 = forms.CharField(label="Initial password again", required=False, strip=False,
                                widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}))

    def __init__(self, *args, actor, current=None, **kwargs):
        super().__init__(*args, **kwargs)
        choices = workspaces_administered(actor).filter(archived_at__isnull=True)
        self.fields["workspace"].queryset = choices
        if current is not None and choices.filter(pk=current.pk).exists():
            self.fields["workspace"].initial = current.pk

    def clean_username(self):
        username = self.cleaned_data["username"]
        if get_user_model().objects.filter(username__iexact=username).exists():
            raise ValidationError("A user with this username exists already.")
        return username

    def clean(self):
        data = super().clean()
        if data.get("sign_in") != self.PASSWORD:
            return data
        first, second = data.get("password1", ""), data.get("password2", "")
        if not first:
            self.add_error("password1", "Type the initial password, or choose the one-time link.")
        elif first != second:
            self.add_error("password2", "The two passwords differ.")
        else:
            candidate = get_user_model()(username=data.get("username", ""), email=data.get("email", ""))
            try:
                password_validation.validate_password(first, candidate)
            except ValidationError as rejected:
                self.add_error("password1", rejected)
        return data


def _users_context(request, *, create_form=None) -> dict:
    filters = UserFilterForm(request.GET or None)
    administered = workspaces_administered(request.user)
    memberships = Membership.objects.filter(workspace__in=administered).select_related("workspace")
    users = filters.filtered(users_visible_to(request.user), administered=administered).prefetch_related(
        Prefetch("memberships", queryset=memberships, to_attr="shown_memberships"))
    context = {"filters": filters, "create_form": create_form or UserCreateForm(actor=request.user, current=request.workspace),
               "events": user_admin.audit_visible_to(request.user)[:AUDIT_SHOWN],
               **sorted_page(request, users, sorting=USER_SORTING)}
    shown = list(context["page"].object_list)
    refusals = manage_refusals(request.user, shown)
    for user in shown:
        user.refusal = refusals[user.pk]
    return context


@require_GET
@role_required(Role.ADMIN)
def users(request):
    context = _users_context(request)
    template = "memweb/_user_rows.html" if request.htmx else "memweb/users.html"
    return render_uncached(request, template, context)


@require_POST
@role_required(Role.ADMIN)
def user_create(request):
    form = UserCreateForm(request.POST, actor=request.user)
    if not form.is_valid():
        return render_uncached(request, "memweb/users.html", _users_context(request, create_form=form), status=400)
    data = form.cleaned_data
    by_link = data["sign_in"] == UserCreateForm.LINK
    user = user_admin.user_create(actor=request.user, username=data["username"], email=data["email"],
                                  password=None if by_link else data["password1"], workspace=data["workspace"],
                                  role=data["role"])
    if not by_link:
        messages.success(request, f"User {user.username} created as {data['role']} in “{data['workspace']}”; "
                                  "they sign in with the password you set.")
        return redirect("users")
    messages.success(request, f"User {user.username} created as {data['role']} in “{data['workspace']}”.")
    link = request.build_absolute_uri(password_set_path(user))
    unsent = password_set_mail_send(request=request, user=user, link=link) if user.email else ""
    context = {"new_user": user, "link": link, "mailed": bool(user.email) and not unsent, "unsent": unsent}
    return render_uncached(request, "memweb/user_created.html", context)


def password_set_path(user) -> str:
    """The one-time link: its token is void once the password is set (it hashes the password), and
    after PASSWORD_RESET_TIMEOUT."""
    link = f"{urlsafe_base64_encode(force_bytes(user.pk))}.{default_token_generator.make_token(user)}"
    return f"{reverse('password_set')}?{urlencode({'link': link})}"


@require_POST
@role_required(Role.ADMIN)
def user_deactivate(request, user_id: int):
    return _active_set(request, user_id, active=False)


@require_POST
@role_required(Role.ADMIN)
def user_reactivate(request, user_id: int):
    return _active_set(request, user_id, active=True)


def _active_set(request, user_id: int, *, active: bool):
    target = get_object_or_404(users_visible_to(request.user), pk=user_id)
    try:
        user_admin.user_active_set(actor=request.user, target=target, active=active)
    except AdminRefused as refused:
        messages.error(request, str(refused))
        return redirect("users")
    if active:
        messages.success(request, f"{target.username} is active again: they can sign in, and their API keys work.")
    else:
        messages.success(request, f"{target.username} is deactivated: they cannot sign in, their sessions end and "
                                  "their API keys are refused.")
    return redirect("users")


@require_http_methods(["GET", "POST"])
def password_set(request):
    """The one-time link's page: the link's token moves into the session at once, out of the address
    bar (and of any Referer), then the new user chooses a password; the token dies with the old one."""
    if "link" in request.GET:
        request.session[LINK_SESSION_KEY] = request.GET["link"]
        return redirect("password_set")
    user = _link_user(request.session.get(LINK_SESSION_KEY, ""))
    if user is None:
        return render(request, "registration/password_set.html", {"validlink": False})
    form = SetPasswordForm(user, request.POST or None)
    if request.method == "POST" and form.is_valid():
        form.save()
        del request.session[LINK_SESSION_KEY]
        messages.success(request, "Your password is set: sign in with it.")
        return redirect("login")
    return render(request, "registration/password_set.html", {"validlink": True, "form": form})


def _link_user(link: str):
    """The account a link names, if its token is still good; else None."""
    uidb64, _, token = link.partition(".")
    try:
        user = get_user_model().objects.get(pk=urlsafe_base64_decode(uidb64).decode())
    except (ValueError, TypeError, OverflowError, ValidationError, get_user_model().DoesNotExist):
        return None
    return user if default_token_generator.check_token(user, token) else None
