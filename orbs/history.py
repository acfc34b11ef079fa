"""A review event's before/after as people read a change: one row per field, old → new, with the
words that changed marked in the long texts (obs, outcome, context). Django-free."""
import difflib
import json
import re
from dataclasses import dataclass

TEXT_FIELDS = ("obs", "outcome", "context")
_TOKEN = re.compile(r"\s+|\w+|[^\w\s]")  # words, runs of space, single punctuation marks


@dataclass(frozen=True)
class Piece:
    text: str
    change: str  # "same", "removed" or "added"


@dataclass(frozen=True)
class FieldChange:
    field: str
    before: str
    after: str
    pieces: tuple[Piece, ...] = ()  # the marked text diff, for TEXT_FIELDS only


def _shown(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, (dict, list)):
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    return str(value)


def text_diff(before: str, after: str) -> tuple[Piece, ...]:
    """The two texts as one sequence of kept, removed and added pieces, word by word."""
    old, new = _TOKEN.findall(before), _TOKEN.findall(after)
    pieces = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if op == "equal":
            pieces.append(Piece("".join(old[i1:i2]), "same"))
            continue
        if i2 > i1:
            pieces.append(Piece("".join(old[i1:i2]), "removed"))
        if j2 > j1:
            pieces.append(Piece("".join(new[j1:j2]), "added"))
    return tuple(pieces)


def event_changes(before: dict, after: dict) -> list[FieldChange]:
    """Every field either side names, in the order first seen."""
    fields = list(dict.fromkeys([*before, *after]))
    changes = []
    for field in fields:
        old, new = _shown(before.get(field)), _shown(after.get(field))
        pieces = text_diff(old, new) if field in TEXT_FIELDS else ()
        changes.append(FieldChange(field=field, before=old, after=new, pieces=pieces))
    return changes
