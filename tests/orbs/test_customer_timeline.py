"""One customer's timeline: everything memweb holds on them across the workspace's banks, newest first,
counted as the erasure counts it (one source of truth), with the erasure started from there. The key
is posted, never put in an address."""
import pytest
from django.urls import reverse

from memweb.models import Job, Workspace
from orbs.models import BankEvent, Orb, RetrievalLog
from orbs.services import bank_get_or_create, bank_policy_update, bank_resolve, orb_remember
from orbs.services.customers import KINDS
from tests.orbs.conftest import post
from tests.orbs.test_erasure import ALICE, BOB, MARKS, _customer_data

URL = reverse("orbs:customer_timeline")
ERASE_URL = reverse("orbs:customer_timeline_erase")


def _look_up(client, key: str, page: int | None = None):
    data = {"customer-customer_key": key} | ({"customer-page": page} if page else {})
    return client.post(URL, data)


@pytest.fixture
def alice_everywhere(agent):
    """Alice and Bob in one bank (every kind of row), Alice in a second bank of the workspace and in
    another workspace's bank."""
    slug = post(agent, "/api/orbs/banks", {"name": "Coffee shop", "customer_scope": "per_customer"}).json()["slug"]
    bank_policy_update(bank=bank_resolve(slug), auto_approve="always")  # so their retrievals find their Orbs
    for n, customer in enumerate((ALICE, BOB)):
        _customer_data(agent, slug, customer, n)
    orb_remember(bank=bank_get_or_create(name="Coffee shop copy"), text=f"Alice {MARKS[ALICE]} likes oat milk.",
                 customer_key=ALICE)
    elsewhere = bank_get_or_create(name="Other team's bank", workspace=Workspace.objects.create(slug="t2", name="T2"))
    orb_remember(bank=elsewhere, text="Alice of another team, never shown here.", customer_key=ALICE)
    agent.defaults.pop("HTTP_AUTHORIZATION")
    return slug


def test_it_lists_everything_of_the_customer_in_the_workspace_newest_first(client, reviewer_user, alice_everywhere):
    client.force_login(reviewer_user)

    page = _look_up(client, ALICE)

    assert page.status_code == 200
    counts = page.context["timeline"].counts
    assert counts == {"orbs": 3, "episodes": 2, "retrievals": 1, "dialogues": 1, "experiences": 2,
                      "experience_trajectories": 1, "dmrm_retrievals": 1}
    entries = page.context["entries"]
    assert {kind for kind, _ in entries} == set(KINDS)
    times = [row.created_at for _, row in entries]
    assert times == sorted(times, reverse=True)
    banks = {row.bank.name for _, row in entries}
    assert banks == {"Coffee shop", "Coffee shop copy"}  # never the other workspace's
    html = page.content.decode()
    assert MARKS[ALICE] in html and MARKS[BOB] not in html and "another team" not in html
    for _, label, _n in page.context["timeline"].labelled_counts():
        assert label in html
    orb = Orb.objects.get(bank__name="Coffee shop copy")
    assert f'href="{reverse("orbs:detail", args=[orb.lineage_id])}?revision=1"' in html


def test_erasing_from_the_timeline_removes_exactly_what_it_counted(client, operator_user, alice_everywhere,
                                                                   django_capture_on_commit_callbacks):
    client.force_login(operator_user)
    counted = _look_up(client, ALICE).context["timeline"].counts

    with django_capture_on_commit_callbacks(execute=True):
        erased = client.post(ERASE_URL, {"erase-customer_key": ALICE, "erase-confirm_customer_key": ALICE,
                                         "erase-reason": "ticket 12"})

    job = Job.objects.get()
    assert erased.status_code == 302 and erased["Location"] == reverse("job_detail", args=[job.pk])
    assert ALICE not in erased["Location"]
    records = BankEvent.objects.filter(action=BankEvent.Action.CUSTOMER_ERASED)
    assert sorted(r.bank_name for r in records) == ["Coffee shop", "Coffee shop copy"]
    erased_counts = {kind: sum(r.counts[kind] for r in records) for kind in KINDS}
    assert erased_counts == counted
    after = _look_up(client, ALICE)
    assert after.context["timeline"].total == 0
    assert "memweb holds nothing on this customer" in after.content.decode()
    assert Orb.all_workspaces.filter(customer_key=ALICE).count() == 1  # the other workspace's stays
    assert _look_up(client, BOB).context["timeline"].total > 0


def test_a_key_typed_again_wrong_erases_nothing_and_says_so_at_the_field(client, operator_user, alice_everywhere):
    client.force_login(operator_user)

    refused = client.post(ERASE_URL, {"erase-customer_key": ALICE, "erase-confirm_customer_key": "alice-7q2y"})

    assert refused.status_code == 422 and not Job.objects.exists()
    assert "does not match the customer key; nothing was erased." in refused.content.decode()
    assert refused.context["timeline"].total == 11  # the timeline stays on screen


def test_erasing_a_customer_nobody_holds_queues_nothing_and_says_so(client, operator_user, bank):
    client.force_login(operator_user)

    refused = client.post(ERASE_URL, {"erase-customer_key": "nobody-9", "erase-confirm_customer_key": "nobody-9"})

    assert refused.status_code == 409 and not Job.objects.exists()
    assert "memweb holds nothing on this customer: nothing was erased." in refused.content.decode()


def test_only_operators_see_and_use_the_erase_action(client, reviewer_user, alice_everywhere):
    client.force_login(reviewer_user)

    assert "Erase this customer" not in _look_up(client, ALICE).content.decode()
    forbidden = client.post(ERASE_URL, {"erase-customer_key": ALICE, "erase-confirm_customer_key": ALICE})
    assert forbidden.status_code == 403 and not Job.objects.exists()


def test_an_unknown_customer_gets_the_empty_state_and_a_blank_key_an_error_at_the_field(client, reviewer_user, bank):
    client.force_login(reviewer_user)

    empty = _look_up(client, "nobody-123")
    blank = _look_up(client, "   ")

    assert empty.status_code == 200 and "memweb holds nothing on this customer" in empty.content.decode()
    assert blank.status_code == 422 and "Type the customer key to look up." in blank.content.decode()


def test_the_key_travels_in_posts_only_and_pages_are_posted_too(client, reviewer_user, bank):
    for n in range(30):
        RetrievalLog.objects.create(bank=bank, query=f"question {n}", rewritten_query=f"question {n}", k=5,
                                    filters={"customer_key": "cust-30"})
    client.force_login(reviewer_user)

    assert "timeline" not in client.get(URL, {"customer-customer_key": "cust-30"}).context  # a key in the address is ignored
    first, second = _look_up(client, "cust-30"), _look_up(client, "cust-30", page=2)

    assert first.context["page"].paginator.count == 30
    assert [row.query for _, row in first.context["entries"]][:2] == ["question 29", "question 28"]
    assert [row.query for _, row in second.context["entries"]] == [f"question {n}" for n in range(4, -1, -1)]
    html = first.content.decode()
    assert 'name="customer-page" value="2"' in html and "?customer" not in html


def test_stored_text_is_shown_escaped(client, reviewer_user, bank):
    orb_remember(bank=bank, text="<script>alert(1)</script> refund please", customer_key="cust-x")
    client.force_login(reviewer_user)

    html = _look_up(client, "cust-x").content.decode()

    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_bank_page_and_an_orbs_page_link_to_the_timeline(client, reviewer_user, bank):
    orb = orb_remember(bank=bank, text="Leave parcels with the neighbour.", customer_key="cust-link").orb
    client.force_login(reviewer_user)

    bank_page = client.get(reverse("orbs:bank_detail", args=[bank.slug])).content.decode()
    orb_page = client.get(reverse("orbs:detail", args=[orb.pk])).content.decode()

    assert f'action="{URL}"' in bank_page and 'name="customer-customer_key"' in bank_page
    assert f'action="{URL}"' in orb_page and 'value="cust-link"' in orb_page
