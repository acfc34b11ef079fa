"""The list-page recipe's capped count: a long list is counted up to the cap and says there are more."""
import pytest
from django.contrib.auth.models import Group
from django.test import RequestFactory

from memweb.listing import CappedPaginator, page_of


def test_a_list_within_the_cap_is_counted_exactly():
    paginator = CappedPaginator(list(range(7)), 3, cap=10)
    assert (paginator.count, paginator.count_capped, paginator.num_pages) == (7, False, 3)


def test_a_list_past_the_cap_counts_to_the_cap_and_pages_stop_there():
    paginator = CappedPaginator(list(range(50)), 3, cap=10)
    assert (paginator.count, paginator.count_capped, paginator.num_pages) == (10, True, 4)
    assert paginator.get_page(99).number == 4


@pytest.mark.django_db
def test_a_queryset_is_counted_no_further_than_the_cap(django_assert_num_queries):
    Group.objects.bulk_create([Group(name=f"group {i}") for i in range(6)])
    paginator = CappedPaginator(Group.objects.filter(name__startswith="group ").order_by("name"), 2, cap=4)
    with django_assert_num_queries(1) as captured:
        assert (paginator.count, paginator.count_capped) == (4, True)
    assert "LIMIT 5" in captured.captured_queries[0]["sql"]
    page = page_of(RequestFactory().get("/", {"page": "2"}), Group.objects.filter(name__startswith="group ").order_by("name"),
                   per_page=4)
    assert [group.name for group in page.object_list] == ["group 4", "group 5"]
    assert (page.paginator.count, page.paginator.count_capped) == (6, False)
