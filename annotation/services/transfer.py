"""Lossless campaign export and import (JSON lines, one record per line).

The file holds the campaign's settings, then its items, feedback tasks,
assignments, judgments and participants, every stored field included; rows
refer to each other by their position in the file, people by username.
Importing re-creates the campaign exactly (tokens too) or, if any line has a
problem, stores nothing and reports every problem by line.
"""
import json
import uuid
from datetime import datetime

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from annotation.models import (
    Adjudication,
    Assignment,
    Campaign,
    FeedbackTask,
    Flag,
    Item,
    Judgment,
    Participant,
    RosterMember,
    Skip,
)
from annotation.services.intake import ImportReport, RowErrors, RowProblem
from memweb.jsonl import LineProblem, jsonl_objects

FORMAT = 1
# Model, its "kind" in the file, the field naming its parent row (None: the campaign itself).
KINDS = (
    (Campaign, "campaign", None), (Item, "item", "campaign"), (FeedbackTask, "feedback_task", "item"),
    (Assignment, "assignment", "item"), (Judgment, "judgment", "assignment"), (Participant, "participant", "campaign"),
    (RosterMember, "roster_member", "campaign"), (Skip, "skip", "item"), (Flag, "flag", "item"),
    (Adjudication, "adjudication", "item"),
)
_USER_FIELDS = {"created_by", "human_feedback_author", "writer", "annotator", "added_by", "flagged_by", "cleared_by",
                "decided_by"}


# Not in the file: it holds one campaign, which is imported into the importer's workspace.
IMPLIED = ("campaign", "workspace")


def _fields(model) -> list:
    return [f for f in model._meta.concrete_fields if not f.primary_key]


def _plain(value):
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value) if isinstance(value, uuid.UUID) else value


def campaign_export_lines(*, campaign: Campaign) -> list[dict]:
    """Every row of the campaign as records; `ref` numbers rows per kind in file order."""
    keys: dict[str, dict[int, int]] = {}
    lines = []
    for model, kind, _ in KINDS:
        keys[kind] = {}
        for ref, row in enumerate(_rows_of(model, campaign), start=1):
            keys[kind][row.pk] = ref
            lines.append({"kind": kind, "ref": ref, **_record(row, keys)})
    lines[0]["format"] = FORMAT
    return lines


def _rows_of(model, campaign: Campaign):
    if model is Campaign:
        return [campaign]
    scope = {"campaign": campaign} if model is not Judgment else {"assignment__campaign": campaign}
    return model.objects.filter(**scope).order_by("pk").select_related(*_user_fields(model))


def _user_fields(model) -> list[str]:
    return [f.name for f in _fields(model) if f.name in _USER_FIELDS]


def _record(row, keys: dict) -> dict:
    record = {}
    for f in _fields(type(row)):
        if f.name in IMPLIED:
            continue
        if f.name in _USER_FIELDS:
            user = getattr(row, f.name)
            record[f.name] = user.get_username() if user else None
        elif f.is_relation:
            record[f.name] = keys[_kind_of(f.related_model)][getattr(row, f.attname)]
        else:
            record[f.name] = _plain(getattr(row, f.attname))
    return record


def _kind_of(model) -> str:
    return next(kind for candidate, kind, _ in KINDS if candidate is model)


def campaign_export_render(*, campaign: Campaign) -> str:
    return "".join(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n"
                   for line in campaign_export_lines(campaign=campaign))


def campaign_import(*, text: str, name: str = "", workspace=None) -> tuple[ImportReport, Campaign | None]:
    """Re-create a campaign from campaign_export_render's text in `workspace` (None: the default
    one), under `name` if given. All-or-nothing: the report lists every problem by line (1 = the
    first line)."""
    errors = RowErrors()
    parsed = _parse(text, errors)
    report = ImportReport(rows=len(parsed))
    rows = _build(parsed, errors, name)
    if rows and workspace is not None and isinstance(rows[0].instance, Campaign):
        rows[0].instance.workspace = workspace
    if not errors:
        _collisions(rows, errors)
    if errors:
        report.problems = sorted(errors, key=lambda problem: problem.row)
        return report, None
    try:
        campaign = _store(rows)
    except IntegrityError as error:
        report.problems = [RowProblem(0, "file", f"the database refused the rows: {error}")]
        return report, None
    report.created = len(rows)
    return report, campaign


def _parse(text: str, errors: RowErrors) -> list[tuple[int, dict]]:
    found: list[LineProblem] = []
    parsed = jsonl_objects(text, found)
    for problem in found:
        errors.add(problem.line, problem.field, problem.reason)
    if not parsed and not errors:
        errors.add(0, "file", "no lines to import")
    return parsed


class _Row:
    def __init__(self, line: int, kind: str, instance, links: dict, people: dict):
        self.line, self.kind, self.instance, self.links, self.people = line, kind, instance, links, people


def _build(parsed: list[tuple[int, dict]], errors: RowErrors, name: str) -> list[_Row]:
    """Validate every line into an unsaved instance; links hold the parent rows' file refs."""
    models_by_kind = {kind: (model, parent) for model, kind, parent in KINDS}
    seen: dict[str, dict[int, _Row]] = {kind: {} for kind in models_by_kind}
    rows = []
    for position, (line, record) in enumerate(parsed):
        kind = record.get("kind")
        if (position == 0) != (kind == "campaign") or kind not in models_by_kind:
            errors.add(line, "kind", "the first line is the campaign, then items, feedback tasks, assignments, "
                                     "judgments, participants, roster members, skips, flags and adjudications")
            continue
        if position == 0 and record.get("format") != FORMAT:
            errors.add(line, "format", f"this memweb reads format {FORMAT}")
        row = _row(line, kind, models_by_kind[kind][0], record, seen, errors)
        if kind == "campaign" and name:
            row.instance.name = name
        seen[kind][record.get("ref")] = row
        rows.append(row)
    return rows


def _row(line: int, kind: str, model, record: dict, seen: dict, errors: RowErrors) -> _Row:
    _shape_check(line, kind, model, record, seen, errors)
    values, links, people = {}, {}, {}
    for f in _fields(model):
        if f.name not in record or f.name in IMPLIED:
            continue
        value = record[f.name]
        if f.name in _USER_FIELDS:
            if value is not None and not isinstance(value, str):
                errors.add(line, f.name, "must be a username or null")
            people[f.name] = value
        elif f.is_relation:
            links[f.name] = seen[_kind_of(f.related_model)].get(value)
            if links[f.name] is None:
                errors.add(line, f.name, f"refers to no earlier {_kind_of(f.related_model)} line")
        else:
            values[f.name] = _python(line, f, value, errors)
    instance = model(**values)
    _clean(line, instance, errors)
    return _Row(line, kind, instance, links, people)


def _shape_check(line: int, kind: str, model, record: dict, seen: dict, errors: RowErrors) -> None:
    """Exactly the model's fields (the campaign is implied), and a ref of its own."""
    expected = {f.name for f in _fields(model)} - set(IMPLIED)
    for unknown in sorted(set(record) - expected - {"kind", "ref", "format"}):
        errors.add(line, unknown, "unknown field")
    for missing in sorted(expected - set(record)):
        errors.add(line, missing, "required")
    if not isinstance(record.get("ref"), int) or record["ref"] in seen[kind]:
        errors.add(line, "ref", "needs a number not used by another line of this kind")


def _python(line: int, f, value, errors: RowErrors):
    try:
        return f.to_python(value)
    except ValidationError as error:
        errors.add(line, f.name, " ".join(error.messages))
        return None


def _clean(line: int, instance, errors: RowErrors) -> None:
    relations = [f.name for f in _fields(type(instance)) if f.is_relation]
    try:
        instance.full_clean(exclude=relations, validate_unique=False, validate_constraints=False)
    except ValidationError as error:
        for name, messages in error.message_dict.items():
            errors.add(line, name, " ".join(messages))


def _collisions(rows: list[_Row], errors: RowErrors) -> None:
    """What would clash with rows already stored: the campaign's name and the opaque tokens."""
    campaign = rows[0].instance
    if Campaign.objects.filter(name=campaign.name).exists():
        errors.add(rows[0].line, "name", f"a campaign named {campaign.name!r} exists; import it under another name")
    for model in (FeedbackTask, Assignment):
        mine = {row.instance.token: row.line for row in rows if isinstance(row.instance, model)}
        for token in model.objects.filter(token__in=list(mine)).values_list("token", flat=True):
            errors.add(mine[token], "token", "already used by a stored row (was this file imported before?)")


@transaction.atomic
def _store(rows: list[_Row]) -> Campaign:
    users = _users({username for row in rows for username in row.people.values() if username})
    campaign = rows[0].instance
    exported_updated_at = campaign.updated_at
    for row in rows:
        for field_name, username in row.people.items():
            setattr(row.instance, field_name, users.get(username))
        for field_name, parent in row.links.items():
            setattr(row.instance, field_name, parent.instance)
        if row.kind not in ("campaign", "judgment"):
            row.instance.campaign = campaign
        row.instance.save(force_insert=True)
    # auto_now rewrote it on save; put back the exported value.
    Campaign.objects.filter(pk=campaign.pk).update(updated_at=exported_updated_at)
    campaign.updated_at = exported_updated_at
    return campaign


def _users(usernames: set[str]) -> dict:
    """Existing accounts by username; missing ones are created with no password and no role,
    so the imported history keeps its authors without granting anyone access."""
    model = get_user_model()
    found = {user.get_username(): user for user in model.objects.filter(**{f"{model.USERNAME_FIELD}__in": usernames})}
    for username in sorted(usernames - set(found)):
        user = model(**{model.USERNAME_FIELD: username})
        user.set_unusable_password()
        user.save()
        found[username] = user
    return found
