"""Links to where an item came from: an item's `source_url` is shown as a link on the items page, so
only a link that opens what it says is kept or shown."""
from urllib.parse import urlsplit

from django.utils.http import url_has_allowed_host_and_scheme


def link_is_safe(url: str) -> bool:
    """An absolute http(s) URL, or a path on this site. Browsers read `/\\evil.example` as another host;
    Django's check reads it that way too, and refuses it."""
    if not url or any(char.isspace() or not char.isprintable() for char in url):
        return False
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.hostname:
        # Also read with backslashes as slashes, as browsers do: the host must be the same both ways.
        return url_has_allowed_host_and_scheme(url, allowed_hosts={parts.hostname})
    return url.startswith("/") and url_has_allowed_host_and_scheme(url, allowed_hosts=None)
