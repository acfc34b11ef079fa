"""Every download's Content-Disposition: one helper, so no file name taken from user data (a task
set's name, a bank's slug) can add parameters to the header or name a path."""
import re

from django.http import HttpResponseBase
from django.utils.http import content_disposition_header

NAME_CHARS = 150
# Letters and digits of any script, and a few harmless marks; anything else becomes "-".
_UNSAFE = re.compile(r"[^\w.()+-]+")
_DASHED_DOTS = re.compile(r"[-.]*-[-.]*")  # what is left of "/../": one dash


def attachment_name(name: str) -> str:
    """`name` as a file name: no quotes, semicolons, slashes, spaces or control characters, no leading
    dot, at most NAME_CHARS characters (the end, with its extension, kept)."""
    cleaned = _DASHED_DOTS.sub("-", _UNSAFE.sub("-", name)).strip("-.")[-NAME_CHARS:].lstrip("-.")
    return cleaned or "download"


def attachment(response: HttpResponseBase, *, filename: str) -> HttpResponseBase:
    """`response` offered as a download of that name (quoted, or RFC 5987-encoded when not ASCII)."""
    response["Content-Disposition"] = content_disposition_header(True, attachment_name(filename))
    return response
