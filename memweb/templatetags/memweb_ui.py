"""Template tags for base.html: the navigation of the signed-in user."""
from django import template

from memweb.navigation import nav_for

register = template.Library()


@register.simple_tag(takes_context=True)
def main_nav(context) -> list[dict]:
    request = context.get("request")
    if request is None or not hasattr(request, "user"):
        return []
    return nav_for(user=request.user, current_path=request.path)


@register.filter
def sorted_list(values) -> list:
    return sorted(values)


@register.filter
def dollars(value) -> str:
    """A cost in US dollars; a dash when unknown (a model without a configured price)."""
    if value is None:
        return "—"
    return "$0" if value == 0 else f"${value:.4f}" if value < 1 else f"${value:,.2f}"
