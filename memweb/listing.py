"""The list-page recipe every list of the dashboard follows: the filtered queryset is paginated,
pagination links keep the filters (the query string without `page`), and an htmx request (a filter
change or a page link) gets only the rows partial, which it swaps in place.

Counting is capped: an exact COUNT(*) over a million Orbs or hundreds of thousands of episodes
reads every matching row, and a page deep in such a list costs an OFFSET of as many. So a list
counts no further than COUNT_CAP rows; past it, the page says "at least" (`count_capped`) and
pages stop at the cap (people narrow a list that long with its filters, they do not page to its
end). docs/PERFORMANCE.md, "Dashboard at scale (issue 17)"."""
from functools import cached_property

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import render

PAGE_SIZE = 25
COUNT_CAP = 10_000


class CappedPaginator(Paginator):
    """A Paginator whose count stops at `cap` rows (`count_capped` then says there are more)."""

    def __init__(self, object_list, per_page, *, cap: int = COUNT_CAP, **kwargs):
        super().__init__(object_list, per_page, **kwargs)
        self.cap = cap

    @cached_property
    def _capped_count(self) -> int:
        rows = self.object_list
        if isinstance(rows, QuerySet):
            return rows.order_by().values("pk")[:self.cap + 1].count()
        return min(len(rows), self.cap + 1)

    @cached_property
    def count(self) -> int:
        return min(self._capped_count, self.cap)

    @property
    def count_capped(self) -> bool:
        return self._capped_count > self.cap


def query_without_page(request) -> str:
    params = request.GET.copy()
    params.pop("page", None)
    return params.urlencode()


def page_of(request, rows: QuerySet | list, *, per_page: int = PAGE_SIZE) -> Page:
    return CappedPaginator(rows, per_page).get_page(request.GET.get("page"))


def list_page(request, *, rows: QuerySet | list, template: str, partial: str, context: dict | None = None,
              per_page: int = PAGE_SIZE) -> HttpResponse:
    """Render `template` (or `partial` for htmx) with `page` and `query` added to `context`."""
    context = {**(context or {}), "page": page_of(request, rows, per_page=per_page),
               "query": query_without_page(request)}
    return render(request, partial if request.htmx else template, context)
