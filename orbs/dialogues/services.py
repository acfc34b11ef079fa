"""The raw-dialogue memory: MemoryBench's naive retrieval baselines.

Finished dialogues are kept as they were said, with no reflection; a query retrieves either past
messages or whole past dialogues, by BM25 (the `bm25s` package) or by embedding similarity
(pgvector through orbs.services.search). A dialogue is matched on its opening customer message and
served whole, as MemoryBench's released baselines key a dialogue. The hits fill the bank's prompt
token budget best first.
"""
from dataclasses import dataclass, replace
from functools import lru_cache

import bm25s
from django.db import IntegrityError, models, transaction

from orbs.dialogues.models import Dialogue, DialogueMessage
from orbs.models import MemoryBank
from orbs.services import trajectory_parse
from orbs.services.banks import bank_embedder
from orbs.services.search import text_nearest

Role = DialogueMessage.Role
PROMPT_HEADER = "Past customer-service conversations (most relevant first):"
_ROLES = {"user": Role.CUSTOMER, "assistant": Role.AGENT}  # tool results and system text are not dialogue
_BM25_CACHE = 16  # (bank, unit, corpus) indexes kept per process
_MIN_CUT_WORDS = 3  # a cut hit shorter than this says nothing


class Method(models.TextChoices):
    BM25 = "bm25", "BM25"
    EMBEDDER = "embedder", "embeddings"


class Unit(models.TextChoices):
    MESSAGE = "message", "messages"
    DIALOGUE = "dialogue", "dialogues"


@dataclass(frozen=True)
class DialogueHit:
    unit_id: int  # the Dialogue's or the DialogueMessage's id
    dialogue_id: int
    dialogue_ref: str
    role: str  # the message's speaker; empty for a whole dialogue
    rank: int
    score: float
    text: str
    injected: bool = False  # in the prompt block (a hit that is not was cut by the token budget)
    truncated: bool = False  # in the prompt only in part: the budget ran out inside it


@dataclass(frozen=True)
class DialogueRetrieval:
    method: str
    unit: str
    k: int
    token_budget: int
    budget_used: int
    prompt_block: str
    hits: list[DialogueHit]


# --- writing ----------------------------------------------------------------------------------

def _spoken(messages) -> list[tuple[str, str]]:
    """(role, text) of each customer and agent message that says something."""
    return [(_ROLES[m.role], m.content.strip()) for m in messages if m.role in _ROLES and m.content.strip()]


def dialogue_from_trajectory(*, bank: MemoryBank, trajectory: dict, dialogue_ref: str,
                             source_label: str = "") -> Dialogue:
    """Store a finished episode's dialogue and its messages with their vectors, once per
    (bank, dialogue_ref). Raises InvalidTrajectory naming each bad field (the trajectory schema
    also requires a customer message, which the dialogue is matched on)."""
    parsed = trajectory_parse(trajectory)
    existing = Dialogue.objects.filter(bank=bank, dialogue_ref=dialogue_ref).first()
    if existing:
        return existing
    spoken = _spoken(parsed.messages)
    opening = next(text for role, text in spoken if role == Role.CUSTOMER)
    model = bank_embedder(bank)
    vectors = model.embed([opening] + [text for _, text in spoken])
    try:
        with transaction.atomic():
            dialogue = Dialogue.objects.create(
                bank=bank, dialogue_ref=dialogue_ref, task_ref=parsed.task_id, customer_key=parsed.customer_key,
                domain=parsed.domain,
                success=parsed.success, reward=parsed.reward, opening=opening, source_label=source_label,
                text="\n".join(f"{role}: {text}" for role, text in spoken), vector=vectors[0].tolist(),
                embedding_model=model.model_name)
            DialogueMessage.objects.bulk_create([
                DialogueMessage(dialogue=dialogue, bank=bank, position=n, role=role, text=text,
                                vector=vector.tolist(), embedding_model=model.model_name)
                for n, ((role, text), vector) in enumerate(zip(spoken, vectors[1:]))])
    except IntegrityError:  # a concurrent writer stored the same dialogue first
        return Dialogue.objects.get(bank=bank, dialogue_ref=dialogue_ref)
    return dialogue


def dialogues_copy(*, source: MemoryBank, target: MemoryBank) -> int:
    """Copy `source`'s dialogues (with their vectors) into `target`, skipping those it holds; how
    many were copied."""
    held = set(Dialogue.objects.filter(bank=target).values_list("dialogue_ref", flat=True))
    copied = 0
    with transaction.atomic():
        for dialogue in Dialogue.objects.filter(bank=source).exclude(dialogue_ref__in=held).prefetch_related("messages"):
            messages = list(dialogue.messages.all())
            dialogue.pk, dialogue.bank = None, target
            dialogue.save()
            DialogueMessage.objects.bulk_create([
                DialogueMessage(dialogue=dialogue, bank=target, position=m.position, role=m.role, text=m.text,
                                vector=m.vector, embedding_model=m.embedding_model) for m in messages])
            copied += 1
    return copied


# --- retrieval --------------------------------------------------------------------------------

def _units(bank_id: int, unit: str, embedding_model: str) -> models.QuerySet:
    if unit == Unit.MESSAGE:
        return DialogueMessage.objects.filter(bank_id=bank_id, embedding_model=embedding_model).select_related("dialogue")
    return Dialogue.objects.filter(bank_id=bank_id, embedding_model=embedding_model)


# A dialogue is matched on its opening; a message on its own text.
_MATCHED_TEXT = {Unit.MESSAGE: "text", Unit.DIALOGUE: "opening"}


def _bm25_tokens(texts: list[str], *, ids: bool):
    return bm25s.tokenize(texts, stopwords="en", return_ids=ids, show_progress=False)


@lru_cache(maxsize=_BM25_CACHE)
def _bm25_index(bank_id: int, unit: str, embedding_model: str, size: int, newest: int) -> tuple[list[int], bm25s.BM25]:
    """The BM25 index of a bank's corpus. `size` and `newest` are in the key so that a corpus that
    grew (a trial's dialogues written) is indexed anew while an unchanged one is read from here."""
    rows = list(_units(bank_id, unit, embedding_model).order_by("pk").values_list("pk", _MATCHED_TEXT[unit]))
    index = bm25s.BM25()  # Lucene's BM25 with k1 = 1.5, b = 0.75
    index.index(_bm25_tokens([text for _, text in rows], ids=True), show_progress=False)
    return [pk for pk, _ in rows], index


def _bm25_ranked(*, bank: MemoryBank, query: str, unit: str, k: int) -> list[tuple[models.Model, float]]:
    queryset = _units(bank.pk, unit, bank.embedding_model)
    corpus = queryset.aggregate(size=models.Count("pk"), newest=models.Max("pk"))
    if not corpus["size"]:
        return []
    ids, index = _bm25_index(bank.pk, unit, bank.embedding_model, corpus["size"], corpus["newest"])
    documents, scores = index.retrieve(_bm25_tokens([query], ids=False), k=min(k, len(ids)), show_progress=False)
    # A unit sharing no word with the query scores 0: it was not found, so it is no hit.
    scored = sorted(((float(s), ids[d]) for d, s in zip(documents[0], scores[0]) if s > 0), key=lambda p: (-p[0], p[1]))
    rows = queryset.in_bulk([pk for _, pk in scored])
    return [(rows[pk], score) for score, pk in scored]


def _embedder_ranked(*, bank: MemoryBank, query: str, unit: str, k: int) -> list[tuple[models.Model, float]]:
    nearest, _, _ = text_nearest(queryset=_units(bank.pk, unit, bank.embedding_model), model=bank_embedder(bank),
                                 text=query, k=k)
    return nearest


_RANKERS = {Method.BM25: _bm25_ranked, Method.EMBEDDER: _embedder_ranked}


def _hit(rank: int, row, score: float) -> DialogueHit:
    if isinstance(row, DialogueMessage):
        return DialogueHit(unit_id=row.pk, dialogue_id=row.dialogue_id, dialogue_ref=row.dialogue.dialogue_ref,
                           role=row.role, rank=rank, score=round(score, 6), text=row.text)
    return DialogueHit(unit_id=row.pk, dialogue_id=row.pk, dialogue_ref=row.dialogue_ref, role="", rank=rank,
                       score=round(score, 6), text=row.text)


def _entry(hit: DialogueHit, text: str) -> str:
    if hit.role:
        return f"[{hit.rank}] The {hit.role} said: {text}"
    return f"[{hit.rank}] A past conversation:\n{text}"


def _cut(block: str, hit: DialogueHit, budget: int, count_tokens) -> str | None:
    """The block with the longest word-prefix of the hit that fits the budget (binary search over
    the words), or None when not even a few words fit."""
    words = hit.text.split(" ")

    def with_words(n: int) -> str:
        return f"{block}\n{_entry(hit, ' '.join(words[:n]) + ' …')}"

    low, high = 0, len(words)
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if count_tokens(with_words(middle)) <= budget else (low, middle - 1)
    return with_words(low) if low >= _MIN_CUT_WORDS else None


def prompt_block_fill(*, hits: list[DialogueHit], token_budget: int, count_tokens) -> tuple[list[DialogueHit], str, int]:
    """The hits as prompt text, best first, each whole while it fits; the first that does not fit
    is cut to what is left of the budget and the block ends there: (hits marked injected or
    truncated, block, its tokens). Whole dialogues are long, and a budget too small for the best
    one would otherwise serve nothing."""
    block, served = PROMPT_HEADER, []
    for hit in hits:
        whole = f"{block}\n{_entry(hit, hit.text)}"
        if count_tokens(whole) <= token_budget:
            block = whole
            served.append(replace(hit, injected=True))
            continue
        cut = _cut(block, hit, token_budget, count_tokens)
        if cut:
            block = cut
            served.append(replace(hit, injected=True, truncated=True))
        break
    marked = served + hits[len(served):]
    return (marked, block, count_tokens(block)) if served else (marked, "", 0)


def dialogues_retrieve(*, bank: MemoryBank, query: str, method: str, unit: str, k: int,
                       token_budget: int | None = None) -> DialogueRetrieval:
    """The top-k past messages or dialogues of `bank` for `query` by `method`, and the prompt block
    that fits `token_budget` (the bank's prompt budget when None). Raises ValueError for an
    unknown method or unit."""
    method, unit = Method(method), Unit(unit)
    budget = token_budget or bank.prompt_token_budget
    ranked = _RANKERS[method](bank=bank, query=query, unit=unit, k=k)
    hits = [_hit(rank, row, score) for rank, (row, score) in enumerate(ranked, start=1)]
    hits, block, used = prompt_block_fill(hits=hits, token_budget=budget, count_tokens=bank_embedder(bank).count_tokens)
    return DialogueRetrieval(method=method.value, unit=unit.value, k=k, token_budget=budget, budget_used=used,
                             prompt_block=block, hits=hits)
