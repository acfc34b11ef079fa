"""Template filters of the evaluation pages: statistics written the way the verdict sentences write them."""
from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

from evaluation.services.episode_search import MATCH_START, MATCH_STOP

register = template.Library()


@register.filter
def points(value, sign: str = "+") -> str:
    """A difference of rates (a fraction) in percentage points, one decimal, signed unless `sign` is
    empty (a size rather than a direction); a dash when unknown."""
    if value is None:
        return "—"
    text = f"{100 * value:{sign}.1f}"
    return "0.0" if text in ("+0.0", "-0.0") else text.replace("-", "\N{MINUS SIGN}")


@register.filter
def p_value(value) -> str:
    if value is None:
        return "—"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


@register.filter
def transcript_snippet(headline: str) -> str:
    """A transcript search's snippet (ts_headline over the messages' JSON array) as readable text,
    escaped, with the matching words in <mark>."""
    plain = headline.replace('\\"', '"').replace("\\n", " ").replace('", "', " · ").strip('[]" ')
    return mark_safe(escape(plain).replace(MATCH_START, "<mark>").replace(MATCH_STOP, "</mark>"))
