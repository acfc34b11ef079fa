"""Items in: JSONL/CSV uploads, the JSON API and memweb's own conversations.

Imports are all-or-nothing: every row is validated first, and if any row has
a problem nothing is stored and the report lists every problem (row, field,
reason). Rows count data records from 1; a CSV header is not a row.
"""
import csv
import io
import json
import re
from dataclasses import asdict, dataclass, field

from django.db import IntegrityError, transaction

from annotation.links import link_is_safe
from annotation.metrics import HUMAN, SIMULATED, TIE
from annotation.models import Campaign, FeedbackTask, Item, Reaction
from memweb.json_input import JsonTooDeep, json_depth_problem, json_loads_bounded
from memweb.jsonl import LineProblem, bytes_text, jsonl_objects, size_refusal
from memweb.problem_report import ProblemReport, problem_report
from memweb.services import unstorable_problem

MAX_UPLOAD_BYTES = 10 * 1024 * 1024
MAX_ROWS = 5000
MAX_TEXT = 50_000
MAX_MESSAGES = 500
FIELDS = (
    "source_ref", "conversation", "task_description", "evaluation_context", "human_feedback",
    "simulated_feedback", "language", "task_format", "domain", "is_gold", "gold_expected", "is_attention",
    "simulated_score", "simulated_action", "simulated_like_probability", "simulated_scripted",
    "source_label", "source_url",
)
REQUIRED = ("conversation", "simulated_feedback", "language", "task_format", "domain")
_LANGUAGE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
_FORMATS = {choice.lower(): choice for choice in Item.TaskFormat.values}
_TRUE, _FALSE = {"true", "1", "yes"}, {"false", "0", "no", ""}


@dataclass(frozen=True)
class RowProblem:
    row: int
    field: str
    reason: str


@dataclass
class ImportReport:
    rows: int = 0
    created: int = 0
    needs_feedback: int = 0
    problems: list[RowProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def problem_report(self) -> ProblemReport:
        return problem_report((f"row {problem.row}" if problem.row else "the file", problem.field, problem.reason)
                              for problem in self.problems)

    def as_dict(self) -> dict:
        return {"ok": self.ok, "rows": self.rows, "created": self.created, "needs_feedback": self.needs_feedback,
                "problems": [asdict(problem) for problem in self.problems]}


class RowErrors(list):
    def add(self, row: int, name: str, reason: str) -> None:
        self.append(RowProblem(row=row, field=name, reason=reason))


def upload_read(*, upload) -> tuple[list[tuple[int, dict]], list[RowProblem]]:
    """upload_parse for an uploaded file: one over the limit is refused before it is read into memory."""
    if upload.size > MAX_UPLOAD_BYTES:
        return [], [RowProblem(0, "file", size_refusal(MAX_UPLOAD_BYTES))]
    return upload_parse(filename=upload.name or "", data=upload.read())


def upload_parse(*, filename: str, data: bytes) -> tuple[list[tuple[int, dict]], list[RowProblem]]:
    """Read an uploaded file into (row number, record) pairs, by its extension (JSONL: memweb.jsonl)."""
    problems = RowErrors()
    if len(data) > MAX_UPLOAD_BYTES:
        problems.add(0, "file", size_refusal(MAX_UPLOAD_BYTES))
        return [], problems
    text, problem = bytes_text(data)
    if problem:
        problems.add(problem.line, problem.field, problem.reason)
        return [], problems
    name = filename.lower()
    if name.endswith((".jsonl", ".ndjson")):
        return _jsonl_records(text, problems), problems
    if name.endswith(".csv"):
        return _csv_records(text, problems), problems
    problems.add(0, "file", "unsupported file type: upload a .jsonl or .csv file")
    return [], problems


def _jsonl_records(text: str, problems: RowErrors) -> list[tuple[int, dict]]:
    found: list[LineProblem] = []
    records = jsonl_objects(text, found, whole="(row)")
    for problem in found:
        problems.add(problem.line, problem.field, problem.reason)
    return records


def _csv_records(text: str, problems: RowErrors) -> list[tuple[int, dict]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if not reader.fieldnames:
        problems.add(0, "file", "empty CSV: the first line must name the columns")
        return []
    # A misspelt column is reported once, not on every row.
    for unknown in [name for name in reader.fieldnames if name.strip() not in FIELDS]:
        problems.add(0, unknown, f"unknown column; expected some of: {', '.join(FIELDS)}")
    records = []
    try:
        for row, record in enumerate(reader, start=1):
            if None in record:
                problems.add(row, "(row)", "more cells than columns in the header")
                record.pop(None)
            records.append((row, {key.strip(): value for key, value in record.items()
                                  if value is not None and key.strip() in FIELDS}))
    except csv.Error as error:
        problems.add(reader.line_num, "(row)", f"unreadable CSV: {error}")
    return records


def items_import(*, campaign: Campaign, records: list[tuple[int, dict]],
                 problems: list[RowProblem] | None = None) -> ImportReport:
    """Validate every record, then store all of them or none."""
    errors = RowErrors(problems or [])
    report = ImportReport(rows=len(records))
    if campaign.status == Campaign.Status.CLOSED:
        errors.add(0, "campaign", "the campaign is closed; reopen it to add items")
    if len(records) > MAX_ROWS:
        errors.add(0, "file", f"{len(records)} rows; at most {MAX_ROWS} per import")
    if not records and not errors:
        errors.add(0, "file", "no rows to import")
    if errors:
        report.problems = sorted(errors, key=lambda problem: problem.row)
        return report
    items = _validated_items(campaign, records, errors)
    if errors:
        report.problems = sorted(errors, key=lambda problem: problem.row)
        return report
    try:
        _store(items, report)
    except IntegrityError:
        report.problems = [RowProblem(0, "source_ref", "a parallel import added the same source_ref; upload again")]
    return report


def _validated_items(campaign: Campaign, records: list[tuple[int, dict]], errors: RowErrors) -> list[Item]:
    existing_refs = set(campaign.items.exclude(source_ref="").values_list("source_ref", flat=True))
    seen_refs: dict[str, int] = {}
    items = []
    for row, record in records:
        if (too_deep := json_depth_problem(record)) is not None:  # records from an API body, decoded already
            errors.add(row, "(row)", too_deep)
            continue
        values = row_values(campaign, row, record, errors)
        ref = values.get("source_ref", "")
        if ref and ref in existing_refs:
            errors.add(row, "source_ref", f"{ref!r} is already in this campaign")
        elif ref and ref in seen_refs:
            errors.add(row, "source_ref", f"{ref!r} repeats row {seen_refs[ref]}")
        elif ref:
            seen_refs[ref] = row
        items.append(Item(campaign=campaign, **values))
    return items


@transaction.atomic
def _store(items: list[Item], report: ImportReport) -> None:
    created = Item.objects.bulk_create(items)
    waiting = [item for item in created if not item.is_ready]
    FeedbackTask.objects.bulk_create(FeedbackTask(item=item, campaign=item.campaign) for item in waiting)
    report.created, report.needs_feedback = len(created), len(waiting)


def row_values(campaign: Campaign, row: int, record: dict, errors: RowErrors) -> dict:
    unstorable = unstorable_problem(record)
    if unstorable:
        errors.add(row, *unstorable)
    for unknown in sorted(set(record) - set(FIELDS)):
        errors.add(row, unknown, f"unknown field; expected some of: {', '.join(FIELDS)}")
    for name in REQUIRED:
        if _blank(record.get(name)):
            errors.add(row, name, "required")
    values = {
        "source_ref": _text(row, record, "source_ref", errors, limit=200),
        "conversation": _conversation(row, record.get("conversation"), errors),
        "task_description": _text(row, record, "task_description", errors),
        "evaluation_context": _text(row, record, "evaluation_context", errors),
        "human_feedback": _text(row, record, "human_feedback", errors),
        "simulated_feedback": _text(row, record, "simulated_feedback", errors),
        "language": _language(row, record.get("language"), errors),
        "task_format": _task_format(row, record.get("task_format"), errors),
        "domain": _text(row, record, "domain", errors, limit=64),
        "is_gold": _boolean(row, record.get("is_gold"), errors),
        "is_attention": _boolean(row, record.get("is_attention"), errors, name="is_attention"),
        "simulated_score": _score(row, record.get("simulated_score"), errors),
        "simulated_action": _reaction(row, record.get("simulated_action"), errors),
        "simulated_like_probability": _probability(row, record.get("simulated_like_probability"), errors),
        "simulated_scripted": _boolean(row, record.get("simulated_scripted"), errors, name="simulated_scripted"),
        "source_label": _text(row, record, "source_label", errors, limit=200),
        "source_url": _source_url(row, record, errors),
    }
    checked = values["is_gold"] or values["is_attention"]
    values["gold_expected"] = _gold_expected(campaign, row, record.get("gold_expected"), checked, errors)
    if values["is_gold"] and values["is_attention"]:
        errors.add(row, "is_attention", "an item is either silent gold or an attention check, not both")
    return values


def _score(row: int, value, errors: RowErrors) -> int | None:
    if _blank(value):
        return None
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or not 1 <= int(text) <= 10:
        errors.add(row, "simulated_score", f"{value!r} is not a whole number from 1 to 10")
        return None
    return int(text)


def _reaction(row: int, value, errors: RowErrors) -> str:
    if _blank(value):
        return ""
    if value not in Reaction.values:
        errors.add(row, "simulated_action", f"{value!r} is not one of {', '.join(Reaction.values)}")
        return ""
    return value


def _probability(row: int, value, errors: RowErrors) -> float | None:
    if _blank(value):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if isinstance(value, bool) or not 0.0 <= number <= 1.0:
        errors.add(row, "simulated_like_probability", f"{value!r} is not a probability from 0 to 1")
        return None
    return number


def _blank(value) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or value in ([], {})


def _text(row: int, record: dict, name: str, errors: RowErrors, limit: int = MAX_TEXT) -> str:
    value = record.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        errors.add(row, name, f"must be text, got {type(value).__name__}")
        return ""
    if len(value) > limit:
        errors.add(row, name, f"longer than {limit} characters")
    return value.strip()


SOURCE_URL_RULE = "must be an absolute http:// or https:// URL, or a path on this memweb starting with a single /"


def _source_url(row: int, record: dict, errors: RowErrors) -> str:
    url = _text(row, record, "source_url", errors, limit=500)
    if url and not link_is_safe(url):
        errors.add(row, "source_url", SOURCE_URL_RULE)
        return ""
    return url


def _conversation(row: int, value, errors: RowErrors) -> list:
    if _blank(value):
        return []
    if isinstance(value, str):
        try:
            value = json_loads_bounded(value)
        except json.JSONDecodeError as error:
            errors.add(row, "conversation", f"not valid JSON: {error.msg}")
            return []
        except JsonTooDeep as error:
            errors.add(row, "conversation", str(error))
            return []
    if not isinstance(value, list) or len(value) > MAX_MESSAGES:
        errors.add(row, "conversation", f"must be a list of at most {MAX_MESSAGES} messages")
        return []
    return [message for index, message in enumerate(value) if _message_ok(row, index, message, errors)]


def _message_ok(row: int, index: int, message, errors: RowErrors) -> bool:
    where = f"conversation[{index}]"
    if not isinstance(message, dict) or not isinstance(message.get("role"), str) or not message["role"].strip():
        errors.add(row, where, 'each message needs a "role" (text)')
        return False
    if not isinstance(message.get("content"), str):
        errors.add(row, where, 'each message needs a "content" (text)')
        return False
    return True


def _language(row: int, value, errors: RowErrors) -> str:
    if _blank(value):
        return ""
    code = str(value).strip()
    if not _LANGUAGE.match(code):
        errors.add(row, "language", f"{code!r} is not a language code such as en, zh or pt-BR")
    return code


def _task_format(row: int, value, errors: RowErrors) -> str:
    if _blank(value):
        return ""
    normalised = _FORMATS.get(str(value).strip().lower())
    if normalised is None:
        errors.add(row, "task_format", f"{value!r} is not one of {', '.join(Item.TaskFormat.values)}")
        return ""
    return normalised


def _boolean(row: int, value, errors: RowErrors, name: str = "is_gold") -> bool:
    if isinstance(value, bool) or value is None:
        return bool(value)
    text = str(value).strip().lower()
    if text not in _TRUE | _FALSE:
        errors.add(row, name, f"{value!r} is not true/false")
    return text in _TRUE


def _gold_expected(campaign: Campaign, row: int, value, checked: bool, errors: RowErrors) -> dict:
    if _blank(value):
        if checked:
            errors.add(row, "gold_expected", "a gold item or attention check needs its expected answers")
        return {}
    if isinstance(value, str):
        try:
            value = json_loads_bounded(value)
        except json.JSONDecodeError as error:
            errors.add(row, "gold_expected", f"not valid JSON: {error.msg}")
            return {}
        except JsonTooDeep as error:
            errors.add(row, "gold_expected", str(error))
            return {}
    allowed = (HUMAN, SIMULATED, TIE) if campaign.allow_ties else (HUMAN, SIMULATED)
    if not isinstance(value, dict) or set(value) - set(campaign.criterion_keys) or set(value.values()) - set(allowed):
        errors.add(row, "gold_expected",
                   f"must map criteria ({', '.join(campaign.criterion_keys)}) to one of {', '.join(allowed)}")
        return {}
    return value


def items_from_conversations(*, campaign: Campaign, conversations: list[dict]) -> ImportReport:
    """memweb's own intake (hook for the evaluation app): each dict has the
    upload row's fields, e.g. an evaluation episode mapped to
    {"source_ref": "episode:<id>", "conversation": [{role, content}, ...],
     "task_description", "evaluation_context", "simulated_feedback",
     "language", "task_format", "domain", "simulated_score", "simulated_action",
     "simulated_like_probability"}.
    Conversations without "human_feedback" enter the feedback-writing queue,
    and their pairwise judging opens once an annotator has written it."""
    return items_import(campaign=campaign, records=list(enumerate(conversations, start=1)))
