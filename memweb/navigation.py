"""What the base UI shows each user: navigation links and the home page's live counts.

Apps contribute both through class attributes of their AppConfig (see memweb.registry):

    nav_items = (("Review queue", "orbs:review_queue", ("reviewer",)),)
    home_counts = (("Orbs awaiting review", "orbs.services.orbs_count_pending", ("reviewer",), "orbs:review_queue"),)

A nav item is (label, url name, roles). A home count is (label, dotted path of a
function taking the keyword `workspace` and returning an int (what that workspace holds), roles[,
url name to link, optionally followed by a query string: "evaluation:run_list?status=failed"]). A
home chart is (title, dotted path of a function taking the keyword `workspace` and returning chart
data, roles); chart data is {"labels": [...], "series": [{"label", "values"}], "unit", "kind":
"line" | "bar"}.
An entry is shown to users holding one of its roles; no roles means every
signed-in user; admins see everything.
"""
from dataclasses import dataclass

from django.urls import reverse
from django.utils.module_loading import import_string

from memweb.registry import declared_tuples
from memweb.roles import Role, has_role


@dataclass(frozen=True)
class NavItem:
    label: str
    url_name: str
    roles: tuple[str, ...] = ()
    superusers_only: bool = False  # the Django admin site (memweb.admin_site)


@dataclass(frozen=True)
class HomeCount:
    label: str
    function: str
    roles: tuple[str, ...] = ()
    url_name: str = ""


@dataclass(frozen=True)
class HomeChart:
    title: str
    function: str
    roles: tuple[str, ...] = ()


CORE_CHARTS = (HomeChart("LLM cost by role per day (the whole server)", "memweb.llm.usage.llm_cost_per_day",
                         (Role.OPERATOR,)),)
CORE_NAV_BEFORE = (NavItem("Home", "home"),)
CORE_NAV_AFTER = (
    NavItem("Jobs", "job_list", (Role.OPERATOR,)),
    NavItem("Health", "health"),
    NavItem("API keys", "api_keys", (Role.OPERATOR,)),
    NavItem("Webhooks", "webhooks", (Role.OPERATOR,)),
    NavItem("API docs", "api:openapi-view"),
    NavItem("Workspaces", "workspaces", (Role.ADMIN,)),
    NavItem("Admin", "admin:index", (Role.ADMIN,), superusers_only=True),
    NavItem("Users", "users", (Role.ADMIN,)),
)


def _declared(attribute: str, kind: type, sizes: tuple[int, ...]) -> list:
    return [kind(entry[0], entry[1], tuple(str(role) for role in entry[2]), *entry[3:])
            for entry in declared_tuples(attribute, sizes)]


def nav_items_declared() -> list[NavItem]:
    return [*CORE_NAV_BEFORE, *_declared("nav_items", NavItem, (3,)), *CORE_NAV_AFTER]


def home_counts_declared() -> list[HomeCount]:
    return _declared("home_counts", HomeCount, (3, 4))


def home_charts_declared() -> list[HomeChart]:
    return [*_declared("home_charts", HomeChart, (3,)), *CORE_CHARTS]


def _visible(user, roles: tuple[str, ...]) -> bool:
    return user.is_authenticated and (not roles or has_role(user, *roles))


def nav_for(*, user, current_path: str) -> list[dict]:
    """Links the user may follow; the one holding the current page is marked active."""
    links = [
        {"label": item.label, "url": reverse(item.url_name)}
        for item in nav_items_declared()
        if _visible(user, item.roles) and (user.is_superuser or not item.superusers_only)
    ]
    # The longest matching prefix wins, so "/orbs/review/" beats "/orbs/" and "/" matches only home.
    matches = [link for link in links
               if current_path == link["url"] or (link["url"] != "/" and current_path.startswith(link["url"]))]
    active = max(matches, key=lambda link: len(link["url"]), default=None)
    return [{**link, "active": link is active} for link in links]


def home_counts_for(*, user, workspace) -> list[dict]:
    return [
        {
            "label": count.label,
            "value": import_string(count.function)(workspace=workspace),
            "url": _url(count.url_name),
        }
        for count in home_counts_declared()
        if _visible(user, count.roles)
    ]


def _url(target: str) -> str:
    """A url name, with the query string that may follow it."""
    if not target:
        return ""
    name, _, query = target.partition("?")
    return f"{reverse(name)}?{query}" if query else reverse(name)


def home_charts_for(*, user, workspace) -> list[dict]:
    return [{"id": f"home-chart-{number}", "title": chart.title,
             "data": import_string(chart.function)(workspace=workspace)}
            for number, chart in enumerate(home_charts_declared(), start=1) if _visible(user, chart.roles)]
