"""A bank as JSON Lines, and back, losslessly.

Line 1 is the bank (name and policy); the next lines are its Orbs, of any
status with vector, provenance episode and full review history. Orbs
refer to each other (revision, near-duplicate, merge) by content hash, so a
file can be imported into another server; an Orb's stable id and revision numbers are
rebuilt from its revision chain (its ids are the importing server's). Import checks every line first and
writes nothing unless all of them are valid.

A file's review decisions were made elsewhere, and nothing in a file proves who made them (a file
without a chain is taken as it is, and a chain can be rebuilt around an edited line). So an imported
Orb (and DMRM experience) that the file says is approved arrives pending, with no local reviewer: its
review events keep their actors' names marked "(imported)" and link to no account here, and a
"flagged" event says who approved it elsewhere. A reviewer here approves it in the queue. The
imported bank's approval policy (approved_only, auto_approve, auto_approve_min_reward) is the
default one, whatever the file says; a reviewer sets it. A copy of this server's own bank
(bank_copy, the copy job) keeps review state and policy, which were decided here.

The file is read by memweb.jsonl's recipe, line by line (a job holds its text once, never a list of its lines): at most
MAX_IMPORT_LINES lines, each nested at most memweb.json_input.MAX_JSON_DEPTH levels, and a refused
file lists its first MAX_LISTED_PROBLEMS problems and counts the rest.

The last lines are the bank's hash chain (orbs.services.history), one "history" line per entry. Import
checks the chain against the file's other lines and refuses a file whose chain breaks, naming the first
entry that does; a file without a chain (exported before banks had one) is taken as it is. The
imported bank starts its own chain with an "imported" entry naming the file's head hash, then chains
the imported rows in the order they happened.

The memories above orbs in the stack (DMRM) add lines of their own types after the Orbs through a
bank file part (memweb.registry.bank_file_parts): a module providing
  LINE_TYPES                                   the "type" values of its lines;
  export_lines(bank) -> Iterable[dict]         its lines of `bank`;
  lines_read(lines, *, bank_name, model_name, report) -> state
                                               check its (line number, text) pairs, adding every
                                               problem to the report; `state` is what it writes;
  lines_write(bank, state, report, *, keep_review)
                                               write them, inside the import's transaction; approved
                                               rows arrive pending unless `keep_review` (a copy).
"""
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import pydantic
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone

from memweb import jsonl
from memweb.embeddings import DIMENSIONS, SUPPORTED_DIMENSIONS, VectorDimensionError, vector_dimension_check
from memweb.errors import problems_of
from memweb.jobs import JobContext, JobFailed, job_start
from memweb.jsonl import line_count, text_lines
from memweb.models import Workspace, default_workspace_id
from memweb.problem_report import ProblemReport, problem_report
from memweb.registry import bank_file_parts, history_kinds
from memweb.services import unstorable_problem
from orbs.errors import OrbsError
from orbs.models import (
    EpisodeRecord,
    MemoryBank,
    Orb,
    ReviewEvent,
    Source,
    content_hash_of,
)
from orbs.services.banks import SETTABLE_FIELDS, approval_defaults, bank_slug_unique
from orbs.services.history import HistoryCheck, history_file_check, history_import_record, history_lines
from orbs.services.identity import orbs_lineages_rebuild

FORMAT = "memweb.orbs"
FORMAT_VERSION = 1
# A 384-d vector is ~8 KB of JSON (1024-d: ~21 KB), so this holds several thousand Orbs; every line of a file is
# parsed into memory before anything is written (all or nothing), which is what the limit bounds.
MAX_IMPORT_BYTES = 64 * 1024 * 1024
# Many times the lines of the largest bank that fits MAX_IMPORT_BYTES with its vectors (an Orb or an
# experience line is several KB); a file of short junk lines stops here instead of being checked
# for minutes.
MAX_IMPORT_LINES = 100_000
# A refused file lists this many problems and counts the rest: a file of junk lines has tens of
# problems per line, and each listed one costs memory (20,000 lines of "{}" once took 1.3 GB).
MAX_LISTED_PROBLEMS = 100
PROGRESS_LINES = 500  # an import job reports its progress every this many lines checked
_REFERENCES = ("supersedes", "near_duplicate_of", "merged_into")
_COPIED = (
    "obs", "emotion", "outcome", "context", "timestamp", "customer_key", "domain", "source", "source_label",
    "episode_ref", "status", "near_duplicate_score", "reviewed_at", "review_note", "embedding_model",
    "emotion_backend", "reflector_backend", "backend_error", "times_retrieved", "last_retrieved_at", "version",
    "created_at",
)


# --- export -------------------------------------------------------------------

def _isoformat(value):
    return value.isoformat() if isinstance(value, datetime) else value


def _episode_line(episode: EpisodeRecord | None) -> dict | None:
    if episode is None:
        return None
    return {"key": episode.pk, "trajectory": episode.trajectory, "source": episode.source,
            "source_label": episode.source_label, "episode_ref": episode.episode_ref,
            "created_at": episode.created_at.isoformat()}


def _event_line(event: ReviewEvent) -> dict:
    return {"action": event.action, "actor": event.actor_name, "before": event.before, "after": event.after,
            "note": event.note, "at": event.at.isoformat()}


def _orb_line(orb: Orb, hashes: dict[int, str]) -> dict:
    line = {"type": "orb", "content_hash": orb.content_hash}
    line |= {name: _isoformat(getattr(orb, name)) for name in _COPIED}
    line |= {name: hashes.get(getattr(orb, f"{name}_id")) for name in _REFERENCES}
    line["reviewer"] = orb.reviewer.get_username() if orb.reviewer else None
    line["vector"] = [float(x) for x in orb.vector]
    line["episode"] = _episode_line(orb.episode)
    line["events"] = [_event_line(event) for event in orb.events.all()]
    return line


def _bank_line(bank: MemoryBank) -> dict:
    policy = {name: getattr(bank, name) for name in SETTABLE_FIELDS}
    return {"type": "bank", "format": FORMAT, "format_version": FORMAT_VERSION, "name": bank.name,
            "embedding_model": bank.embedding_model, "embedding_dimension": bank.embedding_dimension,
            "created_at": bank.created_at.isoformat(), **policy}


@contextmanager
def _snapshot():
    """One view of the database for the whole file (rows written meanwhile are left out), so that the
    chain at its end holds exactly its rows. Inside a transaction already, that transaction's view."""
    if connection.in_atomic_block:
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def bank_export(*, bank: MemoryBank, with_parts: bool = True) -> Iterator[str]:
    """The bank as JSON lines (each ending in a newline), oldest Orb first, then (`with_parts`) the
    lines of the memories above orbs and the bank's hash chain, which covers rows of both."""
    with _snapshot():
        yield json.dumps(_bank_line(bank), ensure_ascii=False) + "\n"
        hashes = dict(Orb.objects.filter(bank=bank).values_list("pk", "content_hash"))
        orbs = Orb.objects.filter(bank=bank).select_related("reviewer", "episode").prefetch_related("events")
        for orb in orbs.order_by("created_at", "pk").iterator(chunk_size=200):
            yield json.dumps(_orb_line(orb, hashes), ensure_ascii=False) + "\n"
        if with_parts:
            for part in bank_file_parts():
                yield from (json.dumps(line, ensure_ascii=False) + "\n" for line in part.export_lines(bank))
            yield from (json.dumps(line, ensure_ascii=False) + "\n" for line in history_lines(bank_id=bank.pk))


# --- import: the shape of each line -------------------------------------------

class BankLine(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    type: Literal["bank"]
    format: Literal["memweb.orbs"]
    format_version: Literal[1]
    name: str = pydantic.Field(min_length=1, max_length=100)
    embedding_model: str = pydantic.Field(min_length=1, max_length=100)
    embedding_dimension: int | None = None  # absent from files exported before banks could use other models
    created_at: datetime
    description: str = ""
    retrieval_k: int = pydantic.Field(ge=1, le=50)
    approved_only: bool
    min_score: float = pydantic.Field(ge=-1, le=1)
    near_duplicate_threshold: float = pydantic.Field(ge=0, le=1)
    auto_approve: Literal["never", "always", "by_rule"]
    auto_approve_min_reward: float
    prompt_token_budget: int = pydantic.Field(ge=50, le=8000)
    # Absent from files exported before banks had a customer scope: those banks were shared.
    customer_scope: Literal[tuple(MemoryBank.CustomerScope.values)] = MemoryBank.CustomerScope.SHARED
    cross_customer_retrieval: bool = False


class EpisodeLine(pydantic.BaseModel):
    key: int
    trajectory: dict[str, Any]
    source: Literal[tuple(Source.values)]
    source_label: str = pydantic.Field(max_length=200)
    episode_ref: str = pydantic.Field(max_length=200)
    created_at: datetime


class EventLine(pydantic.BaseModel):
    action: Literal[tuple(ReviewEvent.Action.values)]
    actor: str = pydantic.Field(max_length=150)
    before: dict[str, Any]
    after: dict[str, Any]
    note: str
    at: datetime


class OrbLine(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    type: Literal["orb"]
    content_hash: str = pydantic.Field(pattern=r"^[0-9a-f]{64}$")
    obs: str = pydantic.Field(min_length=1)
    emotion: str = pydantic.Field(min_length=1, max_length=32)
    outcome: str = pydantic.Field(min_length=1)
    context: dict[str, Any]
    timestamp: datetime
    customer_key: str = pydantic.Field(max_length=200)
    domain: str = pydantic.Field(max_length=64)
    source: Literal[tuple(Source.values)]
    source_label: str = pydantic.Field(max_length=200)
    episode_ref: str = pydantic.Field(max_length=200)
    status: Literal[tuple(Orb.Status.values)]
    supersedes: str | None
    near_duplicate_of: str | None
    near_duplicate_score: float | None
    merged_into: str | None
    reviewer: str | None
    reviewed_at: datetime | None
    review_note: str
    vector: list[float] = pydantic.Field(min_length=1)
    embedding_model: str = pydantic.Field(max_length=100)
    emotion_backend: str = pydantic.Field(max_length=200)
    reflector_backend: str = pydantic.Field(max_length=200)
    backend_error: str
    times_retrieved: int = pydantic.Field(ge=0)
    last_retrieved_at: datetime | None
    version: int = pydantic.Field(ge=1)
    created_at: datetime
    episode: EpisodeLine | None
    events: list[EventLine]

    @pydantic.field_validator("vector")
    @classmethod
    def _supported_dimension(cls, vector: list[float]) -> list[float]:
        if len(vector) not in SUPPORTED_DIMENSIONS:
            raise ValueError(f"has {len(vector)} dimensions; stored vectors have "
                             f"{' or '.join(map(str, SUPPORTED_DIMENSIONS))}")
        return vector


_HEX64 = pydantic.Field(pattern=r"^[0-9a-f]{64}$")


class HistoryLine(pydantic.BaseModel):
    """One entry of the exporting bank's chain; `object_id` is the exporting server's row id."""

    model_config = pydantic.ConfigDict(extra="forbid")

    type: Literal["history"]
    sequence: int = pydantic.Field(ge=1)
    kind: str = pydantic.Field(min_length=1, max_length=32)
    object_id: int | None
    content_hash: str = _HEX64
    previous_hash: str = _HEX64
    entry_hash: str = _HEX64
    detail: dict[str, Any]
    at: datetime


# --- import: validation, then one transaction ------------------------------------

@dataclass
class ImportReport:
    bank: str = ""
    orbs: int = 0
    events: int = 0
    errors: list[dict] = field(default_factory=list)  # the first MAX_LISTED_PROBLEMS problems
    written: dict[str, int] = field(default_factory=dict)  # rows of the bank file parts, by kind
    unlisted: int = 0  # problems past MAX_LISTED_PROBLEMS, counted only
    unlisted_lines: set[int] = field(default_factory=set)  # the lines they are on that no listed problem names

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def problems(self) -> int:
        return len(self.errors) + self.unlisted

    @property
    def full(self) -> bool:
        """Whether further problems are only counted."""
        return len(self.errors) >= MAX_LISTED_PROBLEMS

    def add(self, line: int, field_name: str, message: str) -> None:
        if not self.full:
            self.errors.append({"line": line, "field": field_name, "message": message})
        else:
            self.count_unlisted(line, 1)

    def count_unlisted(self, line: int, problems: int) -> None:
        self.unlisted += problems
        if line != self.errors[-1]["line"]:
            self.unlisted_lines.add(line)

    def add_first(self, line: int, field_name: str, message: str) -> None:
        """A problem of the whole file, listed first however many line problems came before it."""
        self.errors.insert(0, {"line": line, "field": field_name, "message": message})
        if len(self.errors) > MAX_LISTED_PROBLEMS:
            dropped = self.errors.pop()
            self.unlisted += 1
            self.unlisted_lines.add(dropped["line"])

    def summary(self) -> str:
        """One sentence for a refused file's answer: how many problems, how many of them listed."""
        listed = "" if not self.unlisted else f"; the first {len(self.errors)} are listed"
        return f"Nothing was imported: {self.problems} problem{'s' if self.problems != 1 else ''}{listed}"

    def as_dict(self) -> dict:
        """The API's answer to a refused file (ImportReportOut)."""
        return {"detail": self.summary(), "ok": self.ok, "bank": self.bank, "orbs": self.orbs, "events": self.events,
                "problems": self.problems, "unlisted": self.unlisted, "errors": self.errors}

    def problem_report(self) -> ProblemReport:
        listed_lines = {error["line"] for error in self.errors}
        return problem_report(((f"line {error['line']}", error["field"], error["message"]) for error in self.errors),
                              unlisted=self.unlisted, unlisted_records=len(self.unlisted_lines - listed_lines))


def line_value(report: ImportReport, number: int, text: str):
    """The line's JSON value, or None with the problem in `report` (not JSON, nested too deep)."""
    try:
        return jsonl.line_value(text)
    except jsonl.LineRefused as refused:
        report.add(number, "(line)", str(refused))
    return None


def line_parse(report: ImportReport, number: int, text: str, model, value=None):
    """The line as `model`, or None with its problems in `report`. `value`: the line's JSON value,
    when the caller decoded it already (line_value)."""
    value = line_value(report, number, text) if value is None else value
    if value is None:
        return None
    try:
        parsed = model.model_validate_json(text)
    except pydantic.ValidationError as exc:
        if report.full:  # only counted: wording each problem would cost more than the rest of the check
            report.count_unlisted(number, exc.error_count())
            return None
        for field, message in problems_of(exc, whole="(line)"):
            report.add(number, field, message)
        return None
    unstorable = unstorable_problem(value)
    if unstorable:
        report.add(number, *unstorable)
        return None
    return parsed


def _check_header(report: ImportReport, header: BankLine, name: str | None, model_name: str, workspace) -> None:
    target = name or header.name
    report.bank = target
    existing = MemoryBank.all_workspaces.filter(name=target).first()
    if existing is not None and (existing.workspace_id != workspace.pk or existing.orbs.exists()):
        # Another workspace's bank of that name is refused in the same words: it must not show it exists.
        report.add(1, "name", f"bank {target!r} already holds Orbs; import under another name")
    if header.embedding_model != model_name:
        report.add(1, "embedding_model", f"vectors of {header.embedding_model} cannot be searched with {model_name}")
    elif header.embedding_dimension not in (None, DIMENSIONS[model_name]):
        report.add(1, "embedding_dimension", f"{model_name} gives {DIMENSIONS[model_name]} dimensions, "
                                             f"not {header.embedding_dimension}")


def _hash_of(line: OrbLine, header: BankLine) -> str:
    """The Orb's id under the bank's rule: the paper's hash, with the customer in a per-customer bank."""
    per_customer = header.customer_scope == MemoryBank.CustomerScope.PER_CUSTOMER
    return content_hash_of(obs=line.obs, emotion=line.emotion, outcome=line.outcome,
                           customer_key=line.customer_key if per_customer else "")


def _check_orbs(report: ImportReport, orbs: list[tuple[int, OrbLine]], header: BankLine) -> None:
    seen: set[str] = set()
    model_name = header.embedding_model
    for number, line in orbs:
        if _hash_of(line, header) != line.content_hash:
            report.add(number, "content_hash", "is not the Orb's id (SHA-256 of obs ‖ emotion ‖ outcome, and the "
                                               "customer in a per-customer bank): the line was altered")
        if line.content_hash in seen:
            report.add(number, "content_hash", "the same Orb appears twice in the file")
        seen.add(line.content_hash)
        if line.embedding_model != model_name:
            report.add(number, "embedding_model", f"does not match the bank's {model_name}")
        elif (problem := vector_problem(line.vector, model_name)) is not None:
            report.add(number, "vector", problem)
    for number, line in orbs:
        for name in _REFERENCES:
            if getattr(line, name) is not None and getattr(line, name) not in seen:
                report.add(number, name, "refers to an Orb that is not in the file")


def vector_problem(vector: list[float], model_name: str) -> str | None:
    if model_name not in DIMENSIONS:
        return None  # the header's unknown model is reported on line 1
    try:
        vector_dimension_check(vector, model_name=model_name)
    except VectorDimensionError as exc:
        return str(exc)
    return None


def _chained_keys() -> dict[str, set[str]]:
    """Line type -> the keys of its lines that the chain's check reads (history_file_check), so the
    rest of a line (its vector: most of it) is not kept twice."""
    keys: dict[str, set[str]] = {}
    for kind in history_kinds():
        wanted = {kind.in_line} if kind.in_line else {name for name, _ in kind.fields}
        keys.setdefault(kind.line_type, set()).update(wanted | {key for _, key in kind.parent_fields})
    return keys


@dataclass
class _Read:
    header: BankLine | None = None
    orbs: list[tuple[int, OrbLine]] = field(default_factory=list)
    parts: dict = field(default_factory=dict)  # part module -> its (line number, text) pairs, then its state
    history: list[tuple[int, str]] = field(default_factory=list)  # the chain's (line number, text) pairs
    chained: dict = field(default_factory=dict)  # line type -> [(line number, line dict)] of chained rows' lines
    chain: HistoryCheck | None = None  # the file's chain, checked; None when it has none
    lines: int = 0  # lines read


def _read_line(report: ImportReport, read: _Read, number: int, text: str, chained_keys: dict) -> None:
    """Sort one line after the first to its reader: the chain, a bank file part, or the Orbs."""
    value = line_value(report, number, text)
    if value is None:
        return
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "history":
        read.history.append((number, text))
        return
    if kind in chained_keys:
        read.chained.setdefault(kind, []).append((number, {key: value[key] for key in chained_keys[kind] if key in value}))
    part = next((part for part in read.parts if kind in part.LINE_TYPES), None)
    if part is not None:
        read.parts[part].append((number, text))
    elif (parsed := line_parse(report, number, text, OrbLine, value)) is not None:
        read.orbs.append((number, parsed))


def _read(lines: Iterable[str], name: str | None, model_name: str, workspace,
          progress=None) -> tuple[ImportReport, _Read]:
    report, read = ImportReport(), _Read(parts={part: [] for part in bank_file_parts()})
    chained_keys = _chained_keys()  # the lines whose rows the chain covers
    for number, text in enumerate(lines, start=1):
        if number > MAX_IMPORT_LINES:
            report.add_first(number, "(file)", f"the file has more than {MAX_IMPORT_LINES} lines; a bank file has "
                                               f"at most {MAX_IMPORT_LINES}")
            break
        read.lines = number
        if progress is not None and number % PROGRESS_LINES == 0:
            progress(number, message=f"Checked {number} lines")
        if not text.strip():
            continue
        if number == 1:
            # Editors on Windows start UTF-8 files with a byte-order mark; it is not part of the JSON.
            read.header = line_parse(report, 1, text.removeprefix("\ufeff"), BankLine)
            continue
        _read_line(report, read, number, text, chained_keys)
    if read.header is None and not report.errors:
        report.add(1, "(line)", "the file is empty; line 1 must describe the bank")
    if read.header is not None:
        _check_header(report, read.header, name, model_name, workspace)
        _check_orbs(report, read.orbs, read.header)
        read.parts = {part: part.lines_read(part_lines, bank_name=report.bank, model_name=read.header.embedding_model,
                                            report=report) for part, part_lines in read.parts.items()}
        _check_history(report, read)
    return report, read


def _check_history(report: ImportReport, read: _Read) -> None:
    """The file's chain against its other lines; the first entry that breaks is reported on its line."""
    entries = [(number, line_parse(report, number, text, HistoryLine)) for number, text in read.history]
    if not entries or not report.ok:
        return
    read.chain = history_file_check(entries=[line.model_dump(exclude={"type", "at"}) for _, line in entries],
                                    lines=read.chained)
    problem = read.chain.problem
    if problem is not None:
        at_line = next((number for number, line in entries if line.sequence == problem.sequence), problem.line or 0)
        report.add(at_line, "history", f"the bank's history does not verify: {problem.message}")


def _bank_from(header: BankLine, name: str | None, workspace, keep_review: bool) -> MemoryBank:
    policy = {field_name: getattr(header, field_name) for field_name in SETTABLE_FIELDS}
    if not keep_review:
        policy |= approval_defaults()  # the review gate is this server's reviewers' decision
    target = name or header.name
    bank, _ = MemoryBank.objects.get_or_create(
        name=target, workspace=workspace, defaults={"slug": bank_slug_unique(target), "embedding_model": header.embedding_model,
                               "created_at": header.created_at, **policy},
    )
    return bank


def _episode_from(bank: MemoryBank, line: EpisodeLine | None, episodes: dict) -> EpisodeRecord | None:
    if line is None:
        return None
    if line.key not in episodes:
        episodes[line.key] = EpisodeRecord.objects.create(
            bank=bank, trajectory=line.trajectory, source=line.source, source_label=line.source_label,
            episode_ref=line.episode_ref, created_at=line.created_at, status=EpisodeRecord.Status.DONE,
        )
    return episodes[line.key]


def imported_name(name: str) -> str:
    """A person named in a bank file, as this server shows them: not one of its own accounts."""
    return f"{name[:139]} (imported)" if name else ""


def _review_state(line: OrbLine, users: dict, keep_review: bool) -> dict:
    """The Orb's review fields as written (module docstring): a copy keeps them; a file's approved
    Orb arrives pending, reviewed by nobody here."""
    if keep_review:
        return {"reviewer": users.get(line.reviewer)}
    if line.status != Orb.Status.APPROVED:
        return {"reviewer": None}
    return {"reviewer": None, "status": Orb.Status.PENDING, "reviewed_at": None}


def _events_of(orb: Orb, line: OrbLine, users: dict, keep_review: bool) -> list[ReviewEvent]:
    if keep_review:
        return [ReviewEvent(orb=orb, actor=users.get(e.actor), actor_name=e.actor, action=e.action, before=e.before,
                            after=e.after, note=e.note, at=e.at) for e in line.events]
    events = [ReviewEvent(orb=orb, actor=None, actor_name=imported_name(e.actor), action=e.action, before=e.before,
                          after=e.after, note=e.note, at=e.at) for e in line.events]
    if line.status == Orb.Status.APPROVED:
        by = f" by {line.reviewer}" if line.reviewer else ""
        events.append(ReviewEvent(
            orb=orb, actor=None, actor_name="", action=ReviewEvent.Action.FLAGGED, before={"status": line.status},
            after={"status": Orb.Status.PENDING}, at=timezone.now(),
            note=f"imported from a bank file: approved elsewhere{by}; waiting for a reviewer here"))
    return events


def _write(bank: MemoryBank, orbs: list[tuple[int, OrbLine]], report: ImportReport, keep_review: bool) -> None:
    users = {u.get_username(): u for u in get_user_model().objects.all()} if keep_review else {}
    created, episodes = {}, {}
    for _, line in orbs:
        orb = Orb.objects.create(
            bank=bank, content_hash=line.content_hash, vector=line.vector,
            episode=_episode_from(bank, line.episode, episodes),
            **{name: getattr(line, name) for name in _COPIED} | _review_state(line, users, keep_review),
        )
        created[line.content_hash] = orb
        events = ReviewEvent.objects.bulk_create(_events_of(orb, line, users, keep_review))
        report.events += len(events)
    for _, line in orbs:  # references can point forward (an older Orb merged into a newer one)
        links = {f"{name}_id": created[getattr(line, name)].pk for name in _REFERENCES if getattr(line, name)}
        if links:
            Orb.objects.filter(pk=created[line.content_hash].pk).update(**links)
    # An Orb's revisions are its supersedes chain, so the file need not carry lineage or numbers.
    orbs_lineages_rebuild(orb_ids=[orb.pk for orb in created.values()])
    for episode in episodes.values():
        first = next(orb for orb in created.values() if orb.episode_id == episode.pk)
        EpisodeRecord.objects.filter(pk=episode.pk).update(orb=first, created_orb=True)
    report.orbs = len(created)


def bank_upload_read(upload, report: ImportReport) -> str | None:
    """The text of an uploaded bank file; None, with the reason in `report`, when the file is over
    MAX_IMPORT_BYTES (refused before it is read into memory) or not UTF-8 text."""
    text, problem = jsonl.upload_text(upload, max_bytes=MAX_IMPORT_BYTES)
    if problem:
        report.add(problem.line, problem.field, problem.reason)
    return text


def bank_import(*, lines: Iterable[str], name: str | None = None, model_name: str | None = None,
                progress=None, workspace=None, keep_review: bool = False) -> ImportReport:
    """Import an exported bank into `workspace` (None: the default one) under its own name or
    `name`; all lines or nothing.
    `model_name` (default: this server's embedder) is the model the vectors must come from.
    `progress(done, total=None, message="")` (a job's) hears how many lines were checked.
    `keep_review`: the lines are this server's own export (a copy), whose review state and approval
    policy stand; a file's do not (module docstring)."""
    workspace = workspace or Workspace.objects.get(pk=default_workspace_id())
    report, read = _read(lines, name, _model_name(model_name), workspace, progress)
    if not report.ok:
        return report
    if progress is not None:
        progress(read.lines, message=f"Checked every line; writing {len(read.orbs)} Orbs in one transaction")
    with transaction.atomic():
        bank = _bank_from(read.header, name, workspace, keep_review)
        _write(bank, read.orbs, report, keep_review)
        for part, state in read.parts.items():
            part.lines_write(bank, state, report, keep_review=keep_review)
        history_import_record(bank_id=bank.pk, check=read.chain, file_bank=read.header.name)
    return report


def _model_name(model_name: str | None) -> str:
    from memweb.embeddings import embedder

    return model_name or embedder().model_name


def bank_copy(*, source: MemoryBank, name: str, progress=None) -> MemoryBank:
    """A new bank called `name` holding `source`'s Orbs, vectors and history, through its export.
    Raises OrbsError naming the first line that could not be copied. The memories above orbs are
    left out: their callers copy them with their own services (a run's set-up calls
    dmrm_memory_copy next), and copying them here too would write each row twice.
    `progress`: a job's, as bank_import takes it."""
    report, _ = _copy_import(source, name=name, workspace=source.workspace, progress=progress, with_parts=False)
    if not report.ok:
        raise OrbsError(_first_problem(report))
    return MemoryBank.objects.get(name=name)


def _copy_import(source: MemoryBank, *, name: str, workspace, progress, with_parts: bool) -> tuple[ImportReport, int]:
    """`source` imported as `name` through its export, keeping its review state (a copy is this
    server's own decisions); with the number of lines copied. `progress` hears the lines' count first."""
    lines = list(bank_export(bank=source, with_parts=with_parts))
    if progress is not None:
        progress(0, len(lines) + 1, f"Copying {len(lines) - 1} lines of “{source.name}”")
    report = bank_import(lines=lines, name=name, progress=progress, workspace=workspace, keep_review=True)
    return report, len(lines)


def _first_problem(report: ImportReport) -> str:
    first = report.errors[0]
    return f"failed at line {first['line']}, {first['field']}: {first['message']}"


# --- the same, as background jobs (memweb.jobs): the request checks, a worker writes -------------

def bank_import_start(*, upload, workspace, name: str | None = None,
                      user=None) -> tuple[ImportReport, object | None]:
    """Check an uploaded bank file now (its size, encoding and every line) and queue its import into
    `workspace` as a job. Returns the report and the job; no job when the report lists problems."""
    report = ImportReport(bank=name or "")
    text = bank_upload_read(upload, report)
    if text is None:
        return report, None
    if (lines := line_count(text)) > MAX_IMPORT_LINES:  # said first, not after a list of the lines' problems
        report.add(0, "file", f"has {lines} lines; a bank file has at most {MAX_IMPORT_LINES}")
        return report, None
    report, _ = _read(text_lines(text), name, _model_name(None), workspace)
    if not report.ok:
        return report, None
    job = job_start(kind="orbs.bank_import", title=f"Import of bank “{report.bank}”", payload={"name": name},
                    upload=text, user=user, workspace=workspace)
    return report, job


def bank_import_job(context: JobContext, *, name: str | None) -> dict:
    """The import job: the stored file checked again (a bank may have taken the name meanwhile),
    then written in one transaction."""
    text = context.upload
    total = line_count(text)
    context.progress(0, total + 1, "Checking the lines")
    report = bank_import(lines=text_lines(text), name=name, progress=context.progress,
                         workspace=context.workspace)
    if not report.ok:
        raise JobFailed(f"Nothing was imported: {_first_problem(report)}")
    context.progress(total + 1, message=f"Imported {report.orbs} Orbs and {report.events} review events")
    return _bank_result(report)


def _bank_result(report: ImportReport) -> dict:
    slug = MemoryBank.objects.get(name=report.bank).slug
    return {"bank": slug, "orbs": report.orbs, "events": report.events, "written": report.written,
            "url": reverse("orbs:bank_detail", args=[slug]), "link_text": f"Open bank “{report.bank}”"}


def bank_copy_start(*, source: MemoryBank, name: str, user=None):
    """Queue a copy of `source` (its Orbs and the memories above orbs, as its export holds them)
    under the new `name`; returns the job (memweb.jobs). Raises OrbsError when the name is empty or taken."""
    name = name.strip()
    if not name:
        raise OrbsError("name: the copy needs a name")
    if MemoryBank.all_workspaces.filter(name=name).exists():
        raise OrbsError(f"name: a bank called {name!r} already exists")
    return job_start(kind="orbs.bank_copy", title=f"Copy of bank “{source.name}” as “{name}”",
                     payload={"source_id": source.pk, "name": name}, user=user, workspace=source.workspace)


def bank_copy_job(context: JobContext, *, source_id: int, name: str) -> dict:
    """The copy job: the source's export read now, then imported in one transaction."""
    source = MemoryBank.objects.of(context.workspace).filter(pk=source_id).first()
    if source is None:
        raise JobFailed("the bank to copy no longer exists")
    if MemoryBank.all_workspaces.filter(name=name).exists():
        raise JobFailed(f"a bank called {name!r} was created meanwhile; copy under another name")
    report, lines = _copy_import(source, name=name, workspace=context.workspace, progress=context.progress,
                                 with_parts=True)
    if not report.ok:
        raise JobFailed(f"Nothing was copied: {_first_problem(report)}")
    context.progress(lines + 1, message=f"Copied {report.orbs} Orbs and {report.events} review events")
    return _bank_result(report)
