"""Near-duplicate groups of pending Orbs, and merging a group into the Orb kept."""
import pytest
from django.urls import reverse

from orbs.errors import OrbConflict
from orbs.models import Orb
from orbs.services import bank_get_or_create, orb_approve
from orbs.services.duplicates import duplicate_group_of, duplicate_groups, duplicates_merge

JEANS = ("Can I swap my jeans for a size 34?", "Can I swap my jeans for size 34?", "Can I swap my jeans for a size 34 please?")


@pytest.fixture
def jeans(make_orb):
    return [make_orb(text, approve=False) for text in JEANS]


def test_it_groups_pending_near_duplicates_and_leaves_others_out(make_orb, bank, jeans):
    other = make_orb("The toaster burns every slice of bread.", approve=False)
    groups = duplicate_groups(bank=bank)
    assert [sorted(orb.pk for orb in group.orbs) for group in groups] == [sorted(orb.pk for orb in jeans)]
    assert bank.near_duplicate_threshold <= groups[0].similarity <= 1
    assert duplicate_group_of(orb=other) is None
    orb_approve(orb_id=jeans[2].pk, expected_version=jeans[2].version, actor=None)
    assert [len(group.orbs) for group in duplicate_groups(bank=bank)] == [2]  # only pending Orbs are grouped


def test_a_per_customer_bank_groups_one_customers_orbs_only(db, make_orb):
    bank = bank_get_or_create(name="Per customer", customer_scope="per_customer")
    alice = [make_orb(text, approve=False, target=bank, customer_key="alice") for text in JEANS[:2]]
    make_orb(JEANS[2], approve=False, target=bank, customer_key="bob")
    assert [sorted(orb.pk for orb in group.orbs) for group in duplicate_groups(bank=bank)] == [
        sorted(orb.pk for orb in alice)]


def test_a_stricter_threshold_splits_the_group(bank, jeans):
    bank.near_duplicate_threshold = 0.99999
    bank.save()
    assert duplicate_groups(bank=bank) == []


def test_it_merges_a_group_into_the_orb_kept_with_an_edited_lesson(bank, jeans, reviewer_user):
    keep, *others = jeans
    kept = duplicates_merge(keep=(keep.pk, keep.version), others=[(o.pk, o.version) for o in others],
                            actor=reviewer_user, note="same request", outcome="Offer the size exchange at once.")
    assert (kept.lineage_id, kept.revision, kept.outcome) == (keep.pk, 2, "Offer the size exchange at once.")
    keep.refresh_from_db()
    assert keep.status == Orb.Status.SUPERSEDED  # the first revision stays in the history
    for orb in others:
        orb.refresh_from_db()
        assert (orb.status, orb.merged_into_id, orb.review_note) == (Orb.Status.SUPERSEDED, kept.pk, "same request")
    assert duplicate_groups(bank=bank) == []


def test_a_stale_version_merges_nothing(bank, jeans, reviewer_user):
    keep, first, second = jeans
    with pytest.raises(OrbConflict):
        duplicates_merge(keep=(keep.pk, keep.version), others=[(first.pk, first.version), (second.pk, 99)],
                         actor=reviewer_user)
    assert set(Orb.objects.filter(pk__in=[o.pk for o in jeans]).values_list("status", flat=True)) == {"pending"}


@pytest.fixture
def reviewer(client, reviewer_user):
    client.force_login(reviewer_user)
    return client


def test_the_queue_links_each_group_to_its_side_by_side_page(reviewer, jeans):
    page = reviewer.get(reverse("orbs:queue"))
    assert [len(group.orbs) for group in page.context["duplicate_groups"]] == [3]
    link = reverse("orbs:duplicates", args=[jeans[0].pk])
    assert "3 near-duplicates" in page.content.decode() and link in page.content.decode()
    side_by_side = reviewer.get(link)
    assert side_by_side.status_code == 200
    assert all(f'value="{orb.pk}:{orb.version}"' in side_by_side.content.decode() for orb in jeans)


def test_the_side_by_side_page_merges_and_refuses_bad_input(reviewer, jeans):
    keep, first, second = jeans
    url = reverse("orbs:duplicates", args=[second.pk])
    refused = reviewer.post(url, {"keep": f"{keep.pk}:{keep.version}"})
    assert refused.status_code == 422 and "Tick at least one Orb to merge." in refused.content.decode()
    done = reviewer.post(url, {"keep": f"{second.pk}:{second.version}", "note": "one request",
                               "merge": [f"{o.pk}:{o.version}" for o in jeans]})
    assert done.status_code == 302 and done.url == reverse("orbs:detail", args=[second.pk])
    statuses = dict(Orb.objects.filter(pk__in=[o.pk for o in jeans]).values_list("pk", "status"))
    assert statuses == {keep.pk: "superseded", first.pk: "superseded", second.pk: "pending"}
    assert reviewer.get(url).status_code == 404  # the group is gone
