"""The list-page recipe every list of the dashboard follows: the filtered queryset is paginated,
pagination links keep the filters (the query string without `page`), and an htmx request (a filter
change or a page link) gets only the rows partial, which it swaps in place."""
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import render

PAGE_SIZE = 25


def query_without_page(request) -> str:
    params = request.GET.copy()
    params.pop("page", None)
    return params.urlencode()


def page_of(request, rows: QuerySet | list, *, per_page: int = PAGE_SIZE) -> Page:
    return Paginator(rows, per_page).get_page(request.GET.get("page"))


def list_page(request, *, rows: QuerySet | list, template: str, partial: str, context: dict | None = None,
              per_page: int = PAGE_SIZE) -> HttpResponse:
    """Render `template` (or `partial` for htmx) with `page` and `query` added to `context`."""
    context = {**(context or {}), "page": page_of(request, rows, per_page=per_page),
               "query": query_without_page(request)}
    return render(request, partial if request.htmx else template, context)
