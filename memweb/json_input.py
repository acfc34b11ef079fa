"""JSON from outside (an imported file's lines, an uploaded cell) read with a bound on its nesting.

Python's JSON reader recurses once per level and fails with RecursionError past about a thousand
levels, and the checks that walk a decoded value (memweb.services.unstorable_at) recurse too, so a
line of `[[[[…` would end as a server error. Importers read through `json_loads_bounded`, which
names the problem instead; no memweb format nests anywhere near MAX_JSON_DEPTH levels.
"""
import json

MAX_JSON_DEPTH = 64


class JsonTooDeep(ValueError):
    def __init__(self, max_depth: int):
        super().__init__(f"nested deeper than {max_depth} levels (arrays and objects inside each other)")


def json_depth_exceeds(value, max_depth: int) -> bool:
    """Whether `value` (a decoded JSON array or object, level 1) holds arrays or objects more than
    `max_depth` levels deep; walked with a stack of its own, so any depth can be measured."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def json_loads_bounded(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH):
    """json.loads (raising json.JSONDecodeError as it does), refusing with JsonTooDeep a value nested
    deeper than `max_depth`."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise JsonTooDeep(max_depth) from None
    # A text with fewer brackets than the limit cannot nest past it: most lines skip the walk.
    brackets = (b"[", b"{") if isinstance(text, bytes) else ("[", "{")
    if sum(text.count(bracket) for bracket in brackets) > max_depth and json_depth_problem(value, max_depth=max_depth):
        raise JsonTooDeep(max_depth)
    return value


def json_depth_problem(value, *, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """For a value decoded already (an API body): the problem with its nesting, or None."""
    if isinstance(value, dict | list) and json_depth_exceeds(value, max_depth):
        return str(JsonTooDeep(max_depth))
    return None
