"""Template filters of the memory layers' pages."""
from django import template

register = template.Library()


@register.filter
def trial_counter(trial, counter) -> int:
    """The count a memory layer keeps on the trial (a TrialCounter's field)."""
    return getattr(trial, counter.field)
