"""Issue an agent API key for an existing user from the shell (the secret is printed once)."""
from django.contrib.auth import get_user_model
from django.core.management import BaseCommand, CommandError

from memweb.models import ApiKey


class Command(BaseCommand):
    help = "Issue an API key acting as USERNAME (with that user's roles); prints the secret once."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", required=True, help="which agent or script uses the key")

    def handle(self, *args, username, name, **options):
        name = name.strip()
        limit = ApiKey._meta.get_field("name").max_length
        if not name or len(name) > limit:
            raise CommandError(f"--name must be 1 to {limit} characters")
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"no active user {username!r}; create one with: manage.py create_user {username} --role operator")
        key, secret = ApiKey.issue(user=user, name=name)
        self.stdout.write(self.style.SUCCESS(f"Issued API key {key.name!r} ({key.prefix}…) for {username!r}."))
        self.stdout.write(f"key: {secret}\nShown once and stored nowhere; send it as 'Authorization: Bearer <key>'.")
