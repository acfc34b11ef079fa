"""A task's gradable content: the part of its spec that decides what an episode must do and how it
is scored, its SHA-256 content hash, and which parts changed between two specs.

The hash covers four groups of spec fields (CONTENT_GROUPS); labels that only sort and filter tasks
(id, domain, split, difficulty, template, error kinds) are left out, so relabelling a task does not
make the runs scored against it stale. The canonical form is JSON with sorted keys, no spaces and
UTF-8 text: `{"gold_actions": {...}, "gold_lookups": {...}, "instruction": {...}, "required_outputs": {...}}`,
each group holding its fields by name (a missing field as null).
"""
from evaluation.environments import content
from evaluation.environments.content import canonical_json

CONTENT_GROUPS: dict[str, tuple[str, ...]] = {
    # What the simulated customer is told and knows: it decides the conversation an agent faces.
    "instruction": ("instructions", "customer_id", "persona", "intents", "known", "unknown"),
    # The changes the agent must make, and the shop they are replayed on (the gold final state).
    "gold_actions": ("gold_actions", "shop_seed"),
    "gold_lookups": ("gold_lookups",),
    "required_outputs": ("required_outputs",),
}
__all__ = ["CONTENT_GROUPS", "canonical_json", "task_content", "task_content_changes", "task_content_hash"]


def task_content(spec: dict) -> dict:
    """The spec's gradable content, grouped as CONTENT_GROUPS names it."""
    return content.content_of(CONTENT_GROUPS, spec)


def task_content_hash(spec: dict) -> str:
    """SHA-256 (hex) of the canonical JSON of `task_content(spec)`."""
    return content.content_hash(CONTENT_GROUPS, spec)


def task_content_changes(old: dict, new: dict) -> list[str]:
    """The content groups that differ between two specs, in CONTENT_GROUPS order."""
    return content.content_changes(CONTENT_GROUPS, old, new)
