from django import template

from annotation.markup import markdown_to_safe_html

register = template.Library()


@register.filter
def markdown_safe(text: str):
    """Operator markdown -> sanitised HTML (see annotation.markup)."""
    return markdown_to_safe_html(text)


@register.filter
def percent(value, digits: int = 0):
    """0.4213 -> "42%"; None -> "–" (undefined, e.g. no judgments yet)."""
    if value is None:
        return "–"
    return f"{100 * value:.{int(digits)}f}%"


@register.filter
def decimal(value, digits: int = 3):
    if value is None:
        return "–"
    return f"{value:.{int(digits)}f}"


@register.filter
def interval(value: dict | None, style: str = "decimal"):
    """An Interval dict as "0.42 (0.30–0.55)"; "–" parts where undefined."""
    if not value or value.get("value") is None:
        return "–"
    show = percent if style == "percent" else decimal
    if value.get("low") is None:
        return f"{show(value['value'])} (no interval)"
    return f"{show(value['value'])} ({show(value['low'])}–{show(value['high'])})"


@register.filter
def index(sequence, position: int):
    """The item at `position`, for walking two parallel lists in one loop."""
    return sequence[position]
