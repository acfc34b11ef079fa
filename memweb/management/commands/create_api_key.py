"""Issue an agent API key for an existing user from the shell (the secret is printed once)."""
from datetime import date

from django.contrib.auth import get_user_model
from django.core.management import BaseCommand, CommandError
from django.utils import timezone

from memweb.models import ApiKey, Membership, Workspace
from memweb.registry import api_scopes


class Command(BaseCommand):
    help = "Issue an API key acting as USERNAME (with that user's roles); prints the secret once."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", required=True, help="which agent or script uses the key")
        parser.add_argument("--workspace", help="the slug of the workspace the key acts in (default: where the user "
                                                "lands: the workspace they last switched to, else Default)")
        parser.add_argument("--scope", action="append", dest="scopes", metavar="SCOPE",
                            help="a scope the key may use; repeat for several (default: every scope). Known: "
                                 + ", ".join(scope.value for scope in api_scopes()))
        parser.add_argument("--expires", metavar="YYYY-MM-DD", help="the last day the key works (default: none)")

    def handle(self, *args, username, name, workspace=None, scopes=None, expires=None, **options):
        name = name.strip()
        limit = ApiKey._meta.get_field("name").max_length
        if not name or len(name) > limit:
            raise CommandError(f"--name must be 1 to {limit} characters")
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"no active user {username!r}; create one with: manage.py create_user {username} --role operator")
        chosen = _workspace(user, workspace) if workspace is not None else None
        expires_on = _last_day(expires) if expires is not None else None
        try:
            key, secret = ApiKey.issue(user=user, name=name, workspace=chosen, scopes=scopes, expires_on=expires_on)
        except ValueError as unknown_scope:
            raise CommandError(f"--scope: {unknown_scope}") from None
        self.stdout.write(self.style.SUCCESS(
            f"Issued API key {key.name!r} ({key.prefix}…) for {username!r} in workspace {key.workspace.slug!r} "
            f"with the scopes: {', '.join(key.scopes) or 'none'}"
            + (f", working through {key.expires_on.isoformat()}." if key.expires_on else ".")))
        self.stdout.write(f"key: {secret}\nShown once and stored nowhere; send it as 'Authorization: Bearer <key>'.")


def _workspace(user, slug: str) -> Workspace:
    """The workspace named by `slug`, where the user holds a role (a superuser: any)."""
    workspace = Workspace.objects.filter(slug=slug.strip()).first()
    if workspace is None:
        known = ", ".join(Workspace.objects.values_list("slug", flat=True))
        raise CommandError(f"--workspace: no workspace {slug!r}; known: {known}")
    if not user.is_superuser and not Membership.objects.filter(user=user, workspace=workspace).exists():
        raise CommandError(f"--workspace: {user.get_username()!r} holds no role in {slug!r}; "
                           "add them on the Workspaces page first")
    return workspace


def _last_day(text: str) -> date:
    try:
        day = date.fromisoformat(text.strip())
    except ValueError:
        raise CommandError(f"--expires: {text!r} is not a date; write it as YYYY-MM-DD") from None
    if day < timezone.localdate():
        raise CommandError(f"--expires: {day.isoformat()} has passed; choose today or a later day")
    return day
