"""The list-page recipe every list of the dashboard follows: the filtered queryset is paginated,
pagination links keep the filters (the query string without `page`), and an htmx request (a filter
change or a page link) gets only the rows partial, which it swaps in place.

Counting is capped: an exact COUNT(*) over a million Orbs or hundreds of thousands of episodes
reads every matching row, and a page deep in such a list costs an OFFSET of as many. So a list
counts no further than COUNT_CAP rows; past it, the page says "at least" (`count_capped`) and
pages stop at the cap (people narrow a list that long with its filters, they do not page to its
end). docs/PERFORMANCE.md, "Dashboard at scale (issue 17)".

Sorting: a list names the columns it may be sorted by (`Sorting`, a whitelist of sort keys, each
an ORM path for a queryset or an attribute path for a list of rows); `?sort=key` sorts ascending,
`?sort=-key` descending, ties broken by id so pages never repeat or skip a row. A key the list
does not know is ignored with a page message. Column headers link to the other direction with the
`sort_header` tag (memweb_ui), keeping the filters."""
from dataclasses import dataclass, field
from functools import cached_property

from django.contrib import messages
from django.core.paginator import Page, Paginator
from django.db.models import Expression, F, QuerySet
from django.http import HttpResponse
from django.shortcuts import render
from ninja import Field, Schema
from ninja.pagination import PageNumberPagination

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


@dataclass(frozen=True)
class Sorting:
    """The sort keys a list accepts: key -> ORM path or expression (querysets), or dotted path of
    keys and attributes (lists of rows)."""
    columns: dict[str, str | Expression]
    tiebreak: str = "pk"


@dataclass
class SortState:
    """The sort a list page shows: `key` ("" for the list's own order), its direction, and the
    query string without `sort` and `page` that header links build on."""
    key: str = ""
    descending: bool = False
    query: str = ""
    columns: frozenset = field(default_factory=frozenset)


def sort_state(request, sorting: Sorting) -> SortState:
    """The `?sort=` of the request if `sorting` knows it; an unknown key gets a page message."""
    params = request.GET.copy()
    params.pop("page", None)
    asked = params.pop("sort", [""])[-1].strip()
    key = asked.removeprefix("-")
    state = SortState(query=params.urlencode(), columns=frozenset(sorting.columns))
    if key in sorting.columns:
        state.key, state.descending = key, asked.startswith("-")
    elif key:
        known = ", ".join(sorted(sorting.columns))
        messages.warning(request, f"This list cannot be sorted by “{key}”; it is shown in its usual order "
                                  f"(sortable columns: {known}).")
    return state


def rows_sorted(rows: QuerySet | list, *, sorting: Sorting, state: SortState) -> QuerySet | list:
    """`rows` in the order `state` asks for (unchanged when it asks for none)."""
    if not state.key:
        return rows
    path = sorting.columns[state.key]
    if isinstance(rows, QuerySet):
        column = F(path) if isinstance(path, str) else path
        column = column.desc(nulls_last=True) if state.descending else column.asc(nulls_last=True)
        tiebreak = f"-{sorting.tiebreak}" if state.descending else sorting.tiebreak
        return rows.order_by(column, tiebreak)
    def value(row):
        for part in path.split("."):
            row = row[part] if isinstance(row, dict) else getattr(row, part)
        return row
    present = [row for row in rows if value(row) is not None]
    return (sorted(present, key=value, reverse=state.descending)
            + [row for row in rows if value(row) is None])


def page_of(request, rows: QuerySet | list, *, per_page: int = PAGE_SIZE) -> Page:
    return CappedPaginator(rows, per_page).get_page(request.GET.get("page"))


def sorted_page(request, rows: QuerySet | list, *, sorting: Sorting, per_page: int = PAGE_SIZE) -> dict:
    """`page` (sorted as the request asks), `query` (for page links) and `sort` (for the headers)."""
    state = sort_state(request, sorting)
    return {"page": page_of(request, rows_sorted(rows, sorting=sorting, state=state), per_page=per_page),
            "query": query_without_page(request), "sort": state}


def list_page(request, *, rows: QuerySet | list, template: str, partial: str, sorting: Sorting,
              context: dict | None = None, per_page: int = PAGE_SIZE) -> HttpResponse:
    """Render `template` (or `partial` for htmx) with `page`, `query` and `sort` added to `context`."""
    context = {**(context or {}), **sorted_page(request, rows, sorting=sorting, per_page=per_page)}
    return render(request, partial if request.htmx else template, context)


# The API's page numbers: a page past this would ask the database for an OFFSET beyond a bigint (a
# 500) instead of an empty page; no list is that long.
MAX_API_PAGE = 1_000_000_000


class ApiPagination(PageNumberPagination):
    """django-ninja's page-number pagination with a bounded page number (a 422 naming `page`)."""

    class Input(Schema):
        page: int = Field(1, ge=1, le=MAX_API_PAGE)
        page_size: int | None = Field(None, ge=1)
