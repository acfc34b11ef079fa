"""The one recipe for importing a JSONL file (annotation items and campaigns, memory banks, task sets).

1. Size: an upload over the importer's byte limit is refused before it is read into memory
   (`upload_text`); a text already in memory is checked the same way (`text_size_problem`).
2. Text: UTF-8, a leading byte-order mark dropped (Windows editors write one).
3. Lines: split at "\\n" only, since a line's JSON may hold other line separators (U+2028, form
   feeds) inside its strings; numbered from 1 as an editor shows them; blank lines skipped
   (`numbered_lines`), one at a time, never a list of them all.
4. Each line one JSON object, read with a bound on its nesting (`line_object`).
5. A per-line report: every problem is a `LineProblem` (line 0: the whole file), listed in full, so a
   refused file says everything wrong with it at once and nothing is written.

Each importer keeps its own limits, its own checks of a record's content and its own answer's shape.
"""
import json
from collections.abc import Iterator
from dataclasses import dataclass

from memweb.json_input import JsonTooDeep, json_loads_bounded

WHOLE_FILE = 0  # the line number of a problem of the whole file


@dataclass(frozen=True)
class LineProblem:
    line: int
    field: str
    reason: str


class LineRefused(ValueError):
    """A line that is not one JSON object; the message says why."""


def upload_text(upload, *, max_bytes: int) -> tuple[str | None, LineProblem | None]:
    """The text of an uploaded file, or None and the problem: over `max_bytes` (refused before it is
    read) or not UTF-8 text."""
    if upload.size > max_bytes:
        return None, LineProblem(WHOLE_FILE, "file", size_refusal(max_bytes))
    return bytes_text(upload.read())


def bytes_text(data: bytes) -> tuple[str | None, LineProblem | None]:
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as error:
        return None, LineProblem(WHOLE_FILE, "file", f"not UTF-8 text ({error.reason} at byte {error.start})")


def size_refusal(max_bytes: int) -> str:
    return f"larger than {max_bytes // (1024 * 1024)} MB"


def text_size_problem(text: str, *, max_bytes: int, max_lines: int) -> str | None:
    """Why a text in memory is over an importer's limits, or None."""
    if len(text.encode()) > max_bytes:
        return f"the file is {size_refusal(max_bytes)}"
    if line_count(text) > max_lines:
        return f"the file has more than {max_lines} lines"
    return None


def line_count(text: str) -> int:
    """How many lines `numbered_lines` reads (blank ones included), counted without splitting."""
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def text_lines(text: str) -> Iterator[str]:
    """Every line of `text`, blank ones included, split at "\\n" only, one at a time."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        yield text[start:end]
        start = end + 1


def numbered_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number from 1, line) for every line that is not blank; a leading byte-order mark dropped."""
    for number, line in enumerate(text_lines(text.removeprefix("\ufeff")), start=1):
        if line.strip():
            yield number, line


def line_value(line: str):
    """The line's JSON value; LineRefused when it is not JSON or nests too deep."""
    try:
        return json_loads_bounded(line)
    except json.JSONDecodeError as error:
        raise LineRefused(f"not valid JSON ({error.msg} at column {error.colno})") from None
    except JsonTooDeep as error:
        raise LineRefused(str(error)) from None


def line_object(line: str) -> dict:
    """The line's JSON object; LineRefused when it is not one."""
    value = line_value(line)
    if not isinstance(value, dict):
        raise LineRefused(f"each line must be a JSON object, got {type(value).__name__}")
    return value


def jsonl_objects(text: str, problems: list[LineProblem], *, whole: str = "(line)") -> list[tuple[int, dict]]:
    """(line number, object) for every line that is a JSON object; a problem, under the field name
    `whole`, in `problems` for every line that is not."""
    objects = []
    for number, line in numbered_lines(text):
        try:
            objects.append((number, line_object(line)))
        except LineRefused as refused:
            problems.append(LineProblem(number, whole, str(refused)))
    return objects
