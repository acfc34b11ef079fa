"""One readable form for the problems of a refused import, whatever was imported (tasks, runs,
banks, campaign items): grouped by the record they belong to, each worded as a sentence about its
field rather than as a validator's message ("Field required"), and capped so that a file with a
thousand bad lines still shows what to fix first.

Importers describe each problem as (record, field, message): the record as people would name it
("task on line 3 (id: foo)"), the field as a dotted path ("gold_actions.2.name", empty for the
whole record) and the message as the validator wrote it.
"""
import re
from collections.abc import Iterable
from dataclasses import dataclass

MAX_RECORDS = 20
MAX_PER_RECORD = 6
# How the importers name a problem of the whole record rather than of one field.
WHOLE_RECORD = {"", "(line)", "(row)", "(file)", "(body)", "__all__"}

_KINDS = {"string": "a string", "integer": "a whole number", "number": "a number", "boolean": "true or false",
          "list": "a list", "array": "a list", "dictionary": "an object", "object": "an object",
          "datetime": "a date and time", "date": "a date"}
_BOUNDS = {"greater than or equal to": "at least", "less than or equal to": "at most",
           "greater than": "more than", "less than": "less than"}


@dataclass(frozen=True)
class Problem:
    """A sentence about fields: `before` + the fields (shown as code) + `after`."""

    before: str
    fields: tuple[str, ...]
    after: str

    def __str__(self) -> str:
        return self.before + ", ".join(f"`{name}`" for name in self.fields) + self.after


@dataclass(frozen=True)
class RecordProblems:
    record: str
    problems: tuple[Problem, ...]
    more: int  # this record's problems left out


@dataclass(frozen=True)
class ProblemReport:
    records: tuple[RecordProblems, ...]
    more_records: int  # records with problems left out
    total: int  # problems in all
    record_count: int  # records with problems in all
    unlisted: int = 0  # problems the importer counted but did not keep (its own cap), in `total`


def field_path(path: str) -> str:
    """"gold_actions.2.name" -> "gold_actions[2].name": list positions written as people write them."""
    return re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", path)


def _reworded(message: str) -> tuple[str, str] | None:
    """(before, after) for the messages validators repeat most, or None to keep the message."""
    text = message.removeprefix("Value error, ").strip()
    if re.fullmatch(r"(field )?required", text, re.IGNORECASE):
        return "missing field ", ""
    if text == "Extra inputs are not permitted":
        return "unknown field ", ""
    if unknown := re.fullmatch(r"unknown (field|column)(.*)", text, re.DOTALL):
        return f"unknown {unknown[1]} ", unknown[2]
    if kind := re.match(r"Input should be a valid (\w+)", text):
        return "", f" must be {_KINDS.get(kind[1], 'a valid ' + kind[1])}"
    if bound := re.fullmatch(r"Input should be (greater than or equal to|less than or equal to|greater than|less than)"
                             r" (.+)", text):
        return "", f" must be {_BOUNDS[bound[1]]} {bound[2]}"
    if choice := re.fullmatch(r"Input should be (.+)", text, re.DOTALL):
        return "", f" must be {'one of ' if ' or ' in choice[1] else ''}{choice[1]}"
    if re.fullmatch(r"String should have at least 1 character", text):
        return "", " must not be empty"
    if length := re.fullmatch(r"(String|List) should have (at least|at most) (\d+) (characters?|items?)(.*)", text):
        return "", f" must have {length[2]} {length[3]} {length[4]}"
    return None


def problem_sentence(field: str, message: str) -> Problem:
    """A validator's (field, message) as one sentence about the field."""
    text = message.removeprefix("Value error, ")  # pydantic's prefix to a model check's own sentence
    if field in WHOLE_RECORD:
        return Problem(text, (), "")
    reworded = _reworded(message)
    if reworded is not None:
        return Problem(reworded[0], (field_path(field),), reworded[1])
    # Many checks word their message to follow the field's name ("is not the Orb's id").
    joint = " " if re.match(r"(is|are|does|do|must|has|have|refers|cannot|should)\b", text) else ": "
    return Problem("", (field_path(field),), joint + text)


_LISTS = {"missing field ": "missing fields ", "unknown field ": "unknown fields "}


def _merged(problems: list[Problem]) -> list[Problem]:
    """A record's missing (or unknown) fields as one problem naming them all, where the first was."""
    merged: list[Problem] = []
    for problem in problems:
        same = next((i for i, seen in enumerate(merged) if problem.before in _LISTS and not problem.after
                     and seen.before in (problem.before, _LISTS[problem.before]) and not seen.after), None)
        if same is None:
            merged.append(problem)
        else:
            merged[same] = Problem(_LISTS[problem.before], merged[same].fields + problem.fields, "")
    return merged


def problem_report(problems: Iterable[tuple[str, str, str]], *, max_records: int = MAX_RECORDS,
                   max_per_record: int = MAX_PER_RECORD, unlisted: int = 0,
                   unlisted_records: int = 0) -> ProblemReport:
    """(record, field, message) triples grouped by record in the order first seen, capped. An
    importer that keeps only its first problems passes the count of the rest (`unlisted`, on
    `unlisted_records` records none of the triples names)."""
    grouped: dict[str, list[Problem]] = {}
    total = 0
    for record, field, message in problems:
        grouped.setdefault(record, []).append(problem_sentence(field, message))
        total += 1
    shown = []
    for record, found in list(grouped.items())[:max_records]:
        found = _merged(found)
        shown.append(RecordProblems(record, tuple(found[:max_per_record]), max(len(found) - max_per_record, 0)))
    return ProblemReport(records=tuple(shown), more_records=max(len(grouped) - max_records, 0) + unlisted_records,
                         total=total + unlisted, record_count=len(grouped) + unlisted_records, unlisted=unlisted)
