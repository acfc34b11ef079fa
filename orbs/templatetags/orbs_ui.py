"""Small display helpers for the Orbs pages. Every value stays auto-escaped."""
import json

from django import template

from memweb.llm.backends import TextBackend
from orbs.history import event_changes

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


@register.filter
def field_changes(event) -> list:
    """A review event's changes, field by field (orbs.history)."""
    return event_changes(event.before or {}, event.after or {})
