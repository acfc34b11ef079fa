"""Template tags for base.html (the navigation of the signed-in user) and list pages (sortable
column headers, saved views)."""
from django import template
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme

from memweb.listing import SortState
from memweb.navigation import nav_for
from memweb.saved_views import query_for_view, saved_view_url, saved_views_of

register = template.Library()


@register.simple_tag(takes_context=True)
def main_nav(context) -> list[dict]:
    request = context.get("request")
    if request is None or not hasattr(request, "user"):
        return []
    return nav_for(user=request.user, current_path=request.path)


@register.filter
def local_path(url: str) -> str:
    """`url` if it is a path on this site, else "": a stored link must not run script (javascript:)
    or lead elsewhere (//host, /\\host: browsers read a backslash as a slash and drop tabs)."""
    plain = not any(char.isspace() or char == "\\" or not char.isprintable() for char in url)
    if url.startswith("/") and plain and url_has_allowed_host_and_scheme(url, allowed_hosts=set()):
        return url
    return ""


@register.filter
def sorted_list(values) -> list:
    return sorted(values)


@register.simple_tag(takes_context=True)
def sort_header(context, label: str, key: str, css: str = ""):
    """A column header that sorts its list by `key` (app.css draws the arrow from aria-sort): a link
    to the other direction when the list is sorted by it, else to ascending."""
    state: SortState = context.get("sort") or SortState()
    if key not in state.columns:
        return format_html('<th scope="col" class="{}">{}</th>', css, label)
    current = state.key == key
    direction = ("descending" if state.descending else "ascending") if current else "none"
    target = f"-{key}" if current and not state.descending else key
    query = f"{state.query}&sort={target}" if state.query else f"sort={target}"
    hint = f"Sort by {label.lower()}, " + ("descending" if target.startswith("-") else "ascending")
    return format_html('<th scope="col" class="sortable {}" aria-sort="{}"><a href="?{}" data-sort="{}" title="{}">{}</a></th>',
                       css, direction, query, key, hint, label)


@register.inclusion_tag("_saved_views.html", takes_context=True)
def saved_views(context, list_name: str) -> dict:
    """The signed-in user's saved views of the list `list_name` (a URL name), and the form that
    saves what the list shows now."""
    request = context["request"]
    views = [{"view": view, "url": saved_view_url(view)} for view in saved_views_of(user=request.user, list_name=list_name)]
    return {"views": views, "list_name": list_name, "query": query_for_view(request.GET.urlencode()),
            "csrf_token": context.get("csrf_token")}


@register.filter
def dollars(value) -> str:
    """A cost in US dollars; a dash when unknown (a model without a configured price)."""
    if value is None:
        return "—"
    return "$0" if value == 0 else f"${value:.4f}" if value < 1 else f"${value:,.2f}"
