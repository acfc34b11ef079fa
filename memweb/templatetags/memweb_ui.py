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
