"""A task's gradable content, for any environment: the spec fields that decide what an episode must
do and how it is scored, grouped, hashed (SHA-256 of canonical JSON) and compared. Labels that only
sort and filter tasks stay out, so relabelling a task does not make runs scored against it stale."""
import hashlib
import json


def canonical_json(value) -> str:
    """JSON with sorted keys, no spaces and UTF-8 text: the form every memweb hash is taken over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_of(groups: dict[str, tuple[str, ...]], spec: dict) -> dict:
    """The spec's gradable content: each group holding its fields by name (a missing one as null)."""
    return {group: {name: spec.get(name) for name in fields} for group, fields in groups.items()}


def content_hash(groups: dict[str, tuple[str, ...]], spec: dict) -> str:
    return hashlib.sha256(canonical_json(content_of(groups, spec)).encode()).hexdigest()


def content_changes(groups: dict[str, tuple[str, ...]], old: dict, new: dict) -> list[str]:
    """The groups that differ between two specs, in the groups' order."""
    before, after = content_of(groups, old), content_of(groups, new)
    return [group for group in groups if canonical_json(before[group]) != canonical_json(after[group])]
