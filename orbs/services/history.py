"""A bank's tamper-evident history: one SHA-256 hash chain per bank (docs/SECURITY.md).

What is chained (each a *history kind*, registered through memweb.registry.history_kinds): Orb
revisions, review events, and DMRM source-memory builds (orbs.dmrm.services.history). Each chained
row gets one HistoryEntry holding the SHA-256 of the row's canonical content (the kind's `fields`,
serialised as sorted, compact JSON, datetimes in ISO 8601) and the previous entry's hash; the entry's
own hash covers the previous hash, its sequence number, its kind and the content hash. Markers are
entries whose content is their own `detail`: an import (which file head it came from) and an erasure
(which entries lost their rows lawfully).

Only fields that never change once the row is written are chained: an Orb revision's status,
version and context change through review and are recorded by review events instead.

Appending takes a per-bank advisory lock for the rest of the transaction, so two writers on one
bank queue behind each other instead of forking the chain (the unique (bank, sequence) is the
backstop). Verification walks the chain and names the first entry that breaks.
"""
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import datetime

from django.apps import apps as installed_apps
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone

from memweb.jobs import JobContext, job_start
from memweb.models import Job
from memweb.registry import history_kinds
from orbs.models import HistoryEntry, MemoryBank

GENESIS = "0" * 64
IMPORTED = "imported"
ERASURE = "erasure"
MARKERS = (IMPORTED, ERASURE)
VERIFY_JOB = "orbs.history_verify"
# pg_advisory_xact_lock's first key: names this lock among the others memweb may take.
_LOCK_CLASS = 0x6869  # "hi"
PROGRESS_ENTRIES = 5000
# The bank page checks a chain of up to this many entries while it renders (about 0.3 s on the busy
# 2-core build machine: docs/SECURITY.md); a longer one is checked by a job.
INLINE_ENTRIES = 1000


@dataclass(frozen=True)
class HistoryKind:
    """A table whose rows are chained. `fields` pairs each key of the canonical content (also the key
    in the row's bank-file line) with its path in a `values()` query; `line_type` (and `in_line`, a list
    inside that line, with `parent_fields` copied from the enclosing line) is where the bank file
    carries the row."""

    name: str
    model: str
    bank_path: str
    time_path: str
    fields: tuple[tuple[str, str], ...]
    line_type: str
    in_line: str = ""
    parent_fields: tuple[tuple[str, str], ...] = ()


ORB_REVISION = HistoryKind(
    name="orb_revision", model="orbs.Orb", bank_path="bank_id", time_path="created_at", line_type="orb",
    fields=(("content_hash", "content_hash"), ("obs", "obs"), ("emotion", "emotion"), ("outcome", "outcome"),
            ("customer_key", "customer_key"), ("domain", "domain"), ("source", "source"),
            ("source_label", "source_label"), ("episode_ref", "episode_ref"),
            ("supersedes", "supersedes__content_hash"), ("embedding_model", "embedding_model"),
            ("timestamp", "timestamp"), ("created_at", "created_at")),
)
REVIEW_EVENT = HistoryKind(
    name="review_event", model="orbs.ReviewEvent", bank_path="orb__bank_id", time_path="at", line_type="orb",
    in_line="events", parent_fields=(("orb", "content_hash"),),
    fields=(("orb", "orb__content_hash"), ("action", "action"), ("actor", "actor_name"), ("before", "before"),
            ("after", "after"), ("note", "note"), ("at", "at")),
)


def _json_value(value):
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not chained")


def content_hash(content: dict) -> str:
    """SHA-256 of `content` as canonical JSON: sorted keys, no spaces, UTF-8, datetimes in ISO 8601."""
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_value)
    return hashlib.sha256(text.encode()).hexdigest()


def link_hash(*, previous_hash: str, sequence: int, kind: str, content: str) -> str:
    return hashlib.sha256(f"{previous_hash}:{sequence}:{kind}:{content}".encode()).hexdigest()


def _kinds() -> dict[str, HistoryKind]:
    return {kind.name: kind for kind in history_kinds()}


# --- writing ------------------------------------------------------------------------------------

def _rows(kind: HistoryKind, *, bank_id: int, pks: Iterable[int] | None = None, apps=installed_apps):
    """(row id, time, content hash) of the bank's rows of `kind` (only `pks` when given)."""
    rows = apps.get_model(kind.model).objects.filter(**{kind.bank_path: bank_id})
    if pks is not None:
        rows = rows.filter(pk__in=list(pks))
    paths = {path for _, path in kind.fields} | {kind.time_path}
    for row in rows.values("pk", *paths).order_by().iterator(chunk_size=2000):
        yield row["pk"], row[kind.time_path], content_hash({name: row[path] for name, path in kind.fields})


def _row_hashes(kind: HistoryKind, *, bank_id: int, pks: Iterable[int] | None = None) -> dict[int, str]:
    return {pk: digest for pk, _, digest in _rows(kind, bank_id=bank_id, pks=pks)}


def history_lock(*, bank_id: int) -> None:
    """Hold the bank's chain until the current transaction ends (other appenders wait). A writer that
    locks several Orb rows takes this first, so that no two writers wait for each other."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_CLASS, bank_id % 2**31])


def _link(bank_id: int, items: list[tuple[str, int | None, str, dict]], apps=installed_apps) -> None:
    """Append (kind, object id, content hash, detail) entries after the bank's head, under its lock."""
    if not items:
        return
    entry_model = apps.get_model("orbs", "HistoryEntry")
    with transaction.atomic():
        history_lock(bank_id=bank_id)
        head = entry_model.objects.filter(bank_id=bank_id).order_by("-sequence").values("sequence", "entry_hash").first()
        sequence, previous = (head["sequence"], head["entry_hash"]) if head else (0, GENESIS)
        entries = []
        for kind, object_id, content, detail in items:
            sequence += 1
            digest = link_hash(previous_hash=previous, sequence=sequence, kind=kind, content=content)
            entries.append(entry_model(bank_id=bank_id, sequence=sequence, kind=kind, object_id=object_id,
                                       content_hash=content, previous_hash=previous, entry_hash=digest, detail=detail))
            previous = digest
        entry_model.objects.bulk_create(entries, batch_size=2000)


def history_append(*, bank_id: int, rows: list[tuple[HistoryKind, int]]) -> None:
    """Chain `rows` ((kind, row id), in this order) after the bank's head, inside the caller's
    transaction: the rows are read back as stored, so the hash is of what verification will read."""
    hashes = {kind.name: _row_hashes(kind, bank_id=bank_id, pks=[pk for k, pk in rows if k == kind])
              for kind in {kind for kind, _ in rows}}
    _link(bank_id, [(kind.name, pk, hashes[kind.name][pk], {}) for kind, pk in rows])


def history_mark(*, bank_id: int, kind: str, detail: dict) -> None:
    """Append a marker: an entry whose content is `detail` itself."""
    _link(bank_id, [(kind, None, content_hash(detail), detail)])


def history_chain_unchained(*, bank_id: int, apps=installed_apps) -> int:
    """Chain the bank's rows that have no entry yet, oldest first (rows written by an import or a
    copy, or before the chain existed). Returns how many."""
    entry_model = apps.get_model("orbs", "HistoryEntry")
    with transaction.atomic():
        history_lock(bank_id=bank_id)  # before reading what is chained, so no row is chained twice
        pending = []
        for order, kind in enumerate(history_kinds()):
            chained = set(entry_model.objects.filter(bank_id=bank_id, kind=kind.name).values_list("object_id",
                                                                                                 flat=True))
            pending += [(at, order, pk, kind.name, digest)
                        for pk, at, digest in _rows(kind, bank_id=bank_id, apps=apps) if pk not in chained]
        _link(bank_id, [(kind, pk, digest, {}) for _, _, pk, kind, digest in sorted(pending)], apps=apps)
    return len(pending)


def history_erase(*, bank_id: int, rows: list[tuple[HistoryKind, Iterable[int]]], reason: str) -> None:
    """Record, before they are deleted, that these rows go lawfully (a customer's erasure): a marker
    naming their entries' sequence numbers, so verification expects them gone."""
    sequences = sorted(
        sequence for kind, pks in rows
        for sequence in HistoryEntry.objects.filter(bank_id=bank_id, kind=kind.name, object_id__in=list(pks))
        .values_list("sequence", flat=True))
    if sequences:
        history_mark(bank_id=bank_id, kind=ERASURE, detail={"erased": sequences, "reason": reason})


# --- checking -----------------------------------------------------------------------------------

@dataclass
class HistoryProblem:
    """The first entry that breaks. `reason`: entry_missing, link_broken, entry_changed, content_changed,
    row_missing, unchained_row or unknown_kind. `line`: in a bank file, the line of a row no entry holds."""

    sequence: int | None
    kind: str
    object_id: int | None
    reason: str
    message: str
    line: int | None = None


@dataclass
class HistoryCheck:
    entries: int
    head: str
    problem: HistoryProblem | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None

    def as_dict(self) -> dict:
        return {"ok": self.ok, "entries": self.entries, "head": self.head,
                "problem": asdict(self.problem) if self.problem else None}


def _erased(entries: list[dict]) -> dict[int, int]:
    """{erased sequence: the erasure marker's sequence} over the erasure markers of `entries`."""
    return {erased: entry["sequence"] for entry in entries if entry["kind"] == ERASURE
            for erased in entry["detail"].get("erased", [])}


def _entry_problem(entry: dict, expected: int, previous: str, found: str | None, missing: str) -> HistoryProblem | None:
    """What is wrong with one entry: its place in the chain, its own hash, then its row's content."""
    sequence, kind, object_id = entry["sequence"], entry["kind"], entry["object_id"]
    what = kind if object_id is None else f"{kind} #{object_id}"

    def problem(reason: str, message: str) -> HistoryProblem:
        return HistoryProblem(sequence, kind, object_id, reason, f"entry {sequence} ({what}): {message}")

    if sequence != expected:
        return HistoryProblem(expected, "", None, "entry_missing",
                              f"entry {expected}: missing from the chain (the next entry is {sequence}): deleted")
    if entry["previous_hash"] != previous:
        return problem("link_broken", f"its previous hash is not entry {sequence - 1}'s hash: the chain was "
                                      "rewritten from here")
    if link_hash(previous_hash=previous, sequence=sequence, kind=kind, content=entry["content_hash"]) != \
            entry["entry_hash"]:
        return problem("entry_changed", "its own hash does not match its fields: the entry was edited")
    if found == "unknown":
        return problem("unknown_kind", "no installed app chains rows of this kind")
    if found is None:
        return problem("row_missing", missing)
    if found != entry["content_hash"]:
        return problem("content_changed", "the row differs from what was chained: it was edited")
    return None


def chain_walk(entries: list[dict], found: Callable[[dict], str | None], *, missing: str,
               progress: Callable[[int], None] | None = None) -> HistoryCheck:
    """Walk `entries` (dicts of HistoryEntry's fields, by sequence) from the genesis hash; `found(entry)`
    is the content hash of the entry's row as it is now (None: no such row). Stops at the first problem."""
    erased = _erased(entries)
    previous = GENESIS
    for expected, entry in enumerate(entries, start=1):
        if entry["kind"] in MARKERS:
            current = content_hash(entry["detail"])
        elif erased.get(entry["sequence"], 0) > entry["sequence"]:
            current = entry["content_hash"]  # its row was erased lawfully, as a later marker records
        else:
            current = found(entry)
        problem = _entry_problem(entry, expected, previous, current, missing)
        if problem is not None:
            return HistoryCheck(expected - 1, previous, problem)
        previous = entry["entry_hash"]
        if progress is not None and expected % PROGRESS_ENTRIES == 0:
            progress(expected)
    return HistoryCheck(len(entries), previous)


_ENTRY_FIELDS = ("sequence", "kind", "object_id", "content_hash", "previous_hash", "entry_hash", "detail")


def _entries(*, bank_id: int, fields: tuple[str, ...] = _ENTRY_FIELDS) -> list[dict]:
    """The bank's entries by sequence, as dicts of `fields` (what a walk reads, unless more is asked for)."""
    return list(HistoryEntry.objects.filter(bank_id=bank_id).order_by("sequence").values(*fields))


def history_verify(*, bank_id: int, progress: Callable[[int], None] | None = None) -> HistoryCheck:
    """Walk the bank's chain against its rows as they are now; then look for rows written around the
    chain (a row of a chained kind that no entry names)."""
    kinds = _kinds()
    rows = {name: _row_hashes(kind, bank_id=bank_id) for name, kind in kinds.items()}
    entries = _entries(bank_id=bank_id)

    def found(entry: dict) -> str | None:
        return rows[entry["kind"]].get(entry["object_id"]) if entry["kind"] in rows else "unknown"

    check = chain_walk(entries, found, missing="its row is gone: deleted", progress=progress)
    if check.ok:
        check.problem = _unchained(rows, entries)
    return check


def _unchained(rows: dict[str, dict], entries: list[dict]) -> HistoryProblem | None:
    chained = {(entry["kind"], entry["object_id"]) for entry in entries}
    for kind, hashes in rows.items():
        for pk in sorted(hashes):
            if (kind, pk) not in chained:
                return HistoryProblem(None, kind, pk, "unchained_row",
                                      f"{kind} #{pk} is in no entry of the chain: it was written around it")
    return None


# --- a bank file's chain ---------------------------------------------------------------------------

def history_lines(*, bank_id: int) -> Iterable[dict]:
    """The chain as bank-file lines, after every other line."""
    for entry in _entries(bank_id=bank_id, fields=(*_ENTRY_FIELDS, "at")):
        yield {"type": "history", **entry, "at": entry["at"].isoformat()}


def _file_rows(kind: HistoryKind, lines: dict[str, list[tuple[int, dict]]]) -> list[tuple[int, str]]:
    """(line number, content hash) of every row of `kind` the file's lines carry."""
    found = []
    for number, line in lines.get(kind.line_type, []):
        for item in line.get(kind.in_line, []) if kind.in_line else [line]:
            content = {name: item.get(name) for name, _ in kind.fields}
            content |= {name: line.get(key) for name, key in kind.parent_fields}
            found.append((number, content_hash(content)))
    return found


def history_file_check(*, entries: list[dict], lines: dict[str, list[tuple[int, dict]]]) -> HistoryCheck:
    """Check a bank file's chain (its history lines, as dicts) against the rows its other lines carry
    (`lines`: {line type: [(line number, line dict)]}): every entry's content must be a line's, and
    every line's rows must be chained."""
    kinds = _kinds()
    available = {name: Counter(digest for _, digest in _file_rows(kind, lines)) for name, kind in kinds.items()}

    def found(entry: dict) -> str | None:
        if entry["kind"] not in available:
            return "unknown"
        if available[entry["kind"]][entry["content_hash"]] <= 0:
            return None
        available[entry["kind"]][entry["content_hash"]] -= 1
        return entry["content_hash"]

    check = chain_walk(entries, found, missing="no line of the file holds this row as chained: its line was "
                                               "edited or removed")
    if check.ok:
        check.problem = _file_unchained(kinds, lines, available)
    return check


def _file_unchained(kinds: dict[str, HistoryKind], lines: dict, left: dict[str, Counter]) -> HistoryProblem | None:
    for name, kind in kinds.items():
        for number, digest in _file_rows(kind, lines):
            if left[name][digest] > 0:
                return HistoryProblem(None, name, None, "unchained_row",
                                      f"line {number}: holds a {name} that is in no entry of the chain: the line "
                                      "was added or edited", line=number)
    return None


def history_import_record(*, bank_id: int, check: HistoryCheck | None, file_bank: str) -> None:
    """After an import: a marker naming the file's verified head (none: the file carried no chain),
    then the imported rows chained in the order they happened."""
    detail = {"file_bank": file_bank, "file_head": check.head if check else None,
              "file_entries": check.entries if check else 0}
    history_mark(bank_id=bank_id, kind=IMPORTED, detail=detail)
    history_chain_unchained(bank_id=bank_id)


# --- the check as a background job (memweb.jobs) ------------------------------------------------

def history_verify_start(*, bank, user=None) -> Job:
    return job_start(kind=VERIFY_JOB, title=f"History check of bank “{bank.name}”", payload={"bank_id": bank.pk},
                     workspace=bank.workspace, user=user)


def history_verify_job(context: JobContext, *, bank_id: int) -> dict:
    bank = MemoryBank.objects.of(context.workspace).get(pk=bank_id)
    total = bank.history.count()
    context.progress(0, total, f"Checking {total} entries")
    check = history_verify(bank_id=bank_id, progress=lambda done: context.progress(done, total))
    return {**check.as_dict(), "url": reverse("orbs:bank_detail", args=[bank.slug]),
            "link_text": f"Open bank “{bank.name}”"}


def history_status(*, bank: MemoryBank) -> dict:
    """What the bank page and its API show: a check made now when the chain is short enough to walk
    within a page's time (INLINE_ENTRIES), else the result of the latest check job (`job`, which may
    still run). `check` is HistoryCheck.as_dict(), None until a check finished."""
    entries = bank.history.count()
    # The walk reads every row too: a bank whose rows were loaded around the chain (a bulk load) is
    # as long to check as its rows say.
    if entries <= INLINE_ENTRIES and bank.orbs.count() <= INLINE_ENTRIES:
        return {"entries": entries, "check": history_verify(bank_id=bank.pk).as_dict(), "checked_at": timezone.now(),
                "job": None}
    job = history_last_check(bank=bank)
    done = job is not None and job.status == Job.Status.SUCCEEDED
    return {"entries": entries, "check": job.result if done else None, "checked_at": job.finished_at if done else None,
            "job": job}


def history_last_check(*, bank) -> Job | None:
    """The bank's latest history-check job (running or finished), whoever started it."""
    return Job.objects.defer("upload").filter(kind=VERIFY_JOB, payload__bank_id=bank.pk).order_by("-created_at",
                                                                                                  "-pk").first()
