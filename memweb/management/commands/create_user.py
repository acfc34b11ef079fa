"""Create a user holding one or more roles (operator, reviewer, annotator, admin) in a workspace."""
import getpass
import secrets
import sys

from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.management import BaseCommand, CommandError
from django.db import transaction

from memweb.models import DEFAULT_WORKSPACE_SLUG, Workspace, default_workspace_id, memberships_grant
from memweb.roles import Role


class Command(BaseCommand):
    help = (
        "Create a user with roles. Without --password the password is asked for on a terminal, "
        "or generated and printed once (--generate-password, or when not on a terminal)."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", action="append", default=[], dest="roles", metavar="ROLE",
                            help=f"required, repeatable; one of: {', '.join(Role.values)}")
        parser.add_argument("--password", help="beware: visible in the shell history and process list")
        parser.add_argument("--generate-password", action="store_true")
        parser.add_argument("--email", default="")
        parser.add_argument("--workspace", default=DEFAULT_WORKSPACE_SLUG,
                            help="the slug of the workspace the roles are held in (default: %(default)s)")

    def handle(self, *args, username, roles, password, generate_password, email, workspace, **options):
        if not roles:
            raise CommandError(f"give at least one --role: {', '.join(Role.values)}")
        unknown = sorted(set(roles) - set(Role.values))
        if unknown:
            raise CommandError(f"unknown role {', '.join(map(repr, unknown))}; use one of: {', '.join(Role.values)}")
        default_workspace_id()  # the default workspace exists before anyone names it
        member_of = Workspace.objects.filter(slug=workspace).first()
        if member_of is None:
            raise CommandError(f"no workspace {workspace!r}; create it on the Workspaces page first")
        users = get_user_model()
        if users.objects.filter(username=username).exists():
            raise CommandError(f"user {username!r} already exists")
        generated = password is None and (generate_password or not sys.stdin.isatty())
        if generated:
            password = secrets.token_urlsafe(15)
        elif password is None:
            password = self._prompt()
        # Never staff, admins included: the Django admin site is for superusers (memweb.admin_site).
        user = users(username=username, email=email)
        self._validate(password, user)
        with transaction.atomic():
            user.set_password(password)
            user.save()
            # The groups carry the admin site's model permissions; the memberships the roles memweb checks.
            user.groups.set([Group.objects.get_or_create(name=role)[0] for role in roles])
            memberships_grant(user=user, roles=roles, workspace_id=member_of.pk)
        self.stdout.write(self.style.SUCCESS(f"Created user {username!r} with roles: {', '.join(roles)} "
                                             f"in workspace {workspace!r}"))
        if generated:
            self.stdout.write(f"password: {password}\nShown once and stored nowhere; keep it now.")

    def _prompt(self) -> str:
        password = getpass.getpass("Password: ")
        if password != getpass.getpass("Password (again): "):
            raise CommandError("the two passwords differ")
        return password

    def _validate(self, password: str, user) -> None:
        try:
            password_validation.validate_password(password, user)
        except ValidationError as exc:
            raise CommandError("password rejected: " + " ".join(exc.messages)) from None
