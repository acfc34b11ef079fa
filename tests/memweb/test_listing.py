"""The list-page recipe's capped count: a long list is counted up to the cap and says there are more."""
import pytest
from django.contrib.auth.models import Group
from django.test import RequestFactory
from django.urls import reverse

from memweb.listing import CappedPaginator, Sorting, SortState, page_of, rows_sorted
from memweb.models import Job


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


# --- sorting (issue 18): a whitelist of sort keys, ?sort=key / ?sort=-key, ties broken by id ---------

@pytest.fixture
def jobs(operator_user):
    titles = ["b export", "a import", "b export", "c copy"]
    return [Job.objects.create(kind="test", title=title, created_by=operator_user, done=i) for i, title in enumerate(titles)]


def _listed(client, **params) -> list[str]:
    response = client.get(reverse("job_list"), params)
    assert response.status_code == 200
    return [f"{job.title}#{job.done}" for job in response.context["page"].object_list]


def test_a_list_sorts_by_a_whitelisted_column_both_ways_with_ties_in_id_order(client, operator_user, jobs):
    client.force_login(operator_user)
    assert _listed(client, sort="job") == ["a import#1", "b export#0", "b export#2", "c copy#3"]
    assert _listed(client, sort="-job") == ["c copy#3", "b export#2", "b export#0", "a import#1"]
    assert _listed(client, sort="-progress") == ["c copy#3", "b export#2", "a import#1", "b export#0"]


def test_an_unknown_sort_key_is_ignored_with_a_page_message(client, operator_user, jobs):
    client.force_login(operator_user)
    usual = _listed(client)
    for asked in ("title", "-kind", "created_by__password"):
        response = client.get(reverse("job_list"), {"sort": asked})
        assert response.status_code == 200
        assert [f"{job.title}#{job.done}" for job in response.context["page"].object_list] == usual
        assert "This list cannot be sorted by" in response.content.decode()


def test_the_headers_link_to_the_other_direction_keeping_the_filters(client, operator_user, jobs):
    client.force_login(operator_user)
    body = client.get(reverse("job_list"), {"sort": "job", "page": "1", "keep": "x"}).content.decode()
    assert 'aria-sort="ascending"><a href="?keep=x&amp;sort=-job"' in body
    assert 'aria-sort="none"><a href="?keep=x&amp;sort=status"' in body
    body = client.get(reverse("job_list"), {"sort": "-job"}).content.decode()
    assert 'aria-sort="descending"><a href="?sort=job"' in body


def test_a_list_of_rows_sorts_by_a_dotted_path_with_empty_values_last():
    rows = [{"bank": {"k": 3}}, {"bank": {"k": None}}, {"bank": {"k": 1}}]
    sorting = Sorting(columns={"k": "bank.k"})
    assert rows_sorted(rows, sorting=sorting, state=SortState(key="k")) == [rows[2], rows[0], rows[1]]
    assert rows_sorted(rows, sorting=sorting, state=SortState(key="k", descending=True)) == [rows[0], rows[2], rows[1]]
