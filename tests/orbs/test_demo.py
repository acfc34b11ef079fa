"""The demo bank is made by the real pipeline and loads idempotently."""
import io

from orbs.demo import BANK_NAME, load_demo
from orbs.models import MemoryBank, RetrievalLog
from orbs.services import count_pending


def test_it_loads_reviewed_and_pending_orbs_once(db):
    load_demo(stdout=io.StringIO())
    bank = MemoryBank.objects.get(name=BANK_NAME)
    statuses = list(bank.orbs.values_list("status", flat=True))
    output = io.StringIO()
    load_demo(stdout=output)
    assert bank.orbs.count() == len(statuses) == 9 and "(0 new)" in output.getvalue()
    assert statuses.count("approved") == 3 and statuses.count("pending") == 6
    assert count_pending(workspace=bank.workspace) == 6
    assert set(bank.orbs.values_list("domain", flat=True)) == {"appliances", "clothing"}
    assert bank.orbs.filter(near_duplicate_of__isnull=False).count() == 1
    assert set(bank.orbs.values_list("reflector_backend", flat=True)) == {"scripted"}
    assert RetrievalLog.objects.filter(bank=bank, client="demo").count() == 2
