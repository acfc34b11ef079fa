"""How the Orbs and DMRM API routes find the bank a path names, in the request's workspace: 404
when there is none there (another workspace's bank too), 409 when an archived bank is asked to take
memories or serve retrievals."""
from ninja.errors import HttpError

from orbs.errors import BankArchived
from orbs.models import MemoryBank
from orbs.services import bank_resolve
from orbs.services.deletion import bank_open_check


def bank_or_404(request, slug: str) -> MemoryBank:
    try:
        return bank_resolve(slug, workspace=request.workspace)
    except MemoryBank.DoesNotExist:
        raise HttpError(404, f"No memory bank {slug!r}") from None


def open_bank_or_409(request, slug: str) -> MemoryBank:
    """The bank, if it takes memories and serves retrievals: a deleted (archived) one is a 409."""
    bank = bank_or_404(request, slug)
    try:
        bank_open_check(bank)
    except BankArchived as archived:
        raise HttpError(409, str(archived)) from None
    return bank
