"""Small display helpers for the Orbs pages. Every value stays auto-escaped."""
import json

from django import template

from memweb.llm.backends import TextBackend

register = template.Library()

_STATUS_BADGES = {"pending": "badge-pending", "approved": "badge-approved", "rejected": "badge-rejected"}


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


@register.filter
def status_badge(status: str) -> str:
    """The shared stylesheet's badge class for an Orb status (superseded is neutral)."""
    return _STATUS_BADGES.get(status, "badge-neutral")


@register.filter
def is_scripted(backend: str) -> bool:
    return TextBackend.is_scripted(backend)
