"""Check every bank's hash chain (orbs.services.history), or one bank's; exit 1 when any breaks."""
from django.core.management.base import BaseCommand, CommandError

from orbs.models import MemoryBank
from orbs.services.history import history_verify


class Command(BaseCommand):
    help = ("Walk each bank's history chain (review events, Orb revisions, source-memory builds) and report OK "
            "or the first entry that breaks; exits 1 when any bank's chain breaks.")

    def add_arguments(self, parser):
        parser.add_argument("--bank", metavar="SLUG", help="check only this bank (default: every bank)")

    def handle(self, *args, bank=None, **options):
        banks = MemoryBank.objects.order_by("slug")
        if bank is not None:
            banks = banks.filter(slug=bank)
            if not banks.exists():
                raise CommandError(f"no bank has the slug {bank!r}")
        broken = [slug for slug, bank_id in banks.values_list("slug", "pk") if not self._checked(slug, bank_id)]
        if broken:
            raise CommandError(f"the history of {len(broken)} bank(s) does not verify: {', '.join(broken)}")

    def _checked(self, slug: str, bank_id: int) -> bool:
        check = history_verify(bank_id=bank_id)
        if check.ok:
            self.stdout.write(f"{slug}: OK, {check.entries} entries verified, head {check.head}")
        else:
            self.stdout.write(f"{slug}: BROKEN after {check.entries} verified entries: {check.problem.message}")
        return check.ok
