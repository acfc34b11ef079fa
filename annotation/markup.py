"""Campaign instructions are markdown written by operators: rendered, then
sanitised with an allow-list, so no script or event handler reaches annotators."""
import markdown
import nh3
from django.utils.safestring import SafeString, mark_safe

_TAGS = {
    "p", "br", "hr", "strong", "em", "b", "i", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td",
}
_ATTRIBUTES = {"a": {"href", "title"}, "th": {"align"}, "td": {"align"}}


def markdown_to_safe_html(text: str) -> SafeString:
    html = markdown.markdown(text or "", extensions=["tables", "fenced_code", "sane_lists"])
    cleaned = nh3.clean(html, tags=_TAGS, attributes=_ATTRIBUTES, url_schemes={"http", "https", "mailto"},
                        link_rel="noopener noreferrer nofollow")
    return mark_safe(cleaned)  # nh3's allow-list output is the only HTML we trust
