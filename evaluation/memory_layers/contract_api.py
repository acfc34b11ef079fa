"""A memweb bank served over the memory-layer contract (evaluation.memory_layers.schemas), so that
another harness can evaluate memory built in memweb: /api/memory-layer/<bank>/describe, retrieve,
learn, reset and snapshot, with memweb's API keys and the key's workspace, as every API route.

What the bank serves is MemOrb's: retrieve answers the bank's reviewed reflections nearest to the
situation (orbs_retrieve), learn reflects the episode into an Orb, which passes the bank's review
gate like any other. A bank is shared memory, not a harness's scratch space: retrieve serves the
whole bank, while reset and snapshot concern only the Orbs the namespace's learn calls wrote
(labelled with it), and reset soft-deletes those, never the bank's own.
"""
import hashlib

from django.db import transaction
from django.http import JsonResponse
from django.shortcuts import get_object_or_404
from ninja import Router
from ninja.errors import HttpError

from evaluation.memory_layers.schemas import (
    CONTRACT_VERSION,
    LayerDescribeOut,
    LayerLearnIn,
    LayerLearnOut,
    LayerNamespaceIn,
    LayerResetOut,
    LayerRetrieveIn,
    LayerRetrieveOut,
    LayerSnapshotOut,
    budget_cut,
    contract_openapi,
    major_version,
)
from memweb.auth import api_auth
from memweb.roles import Role
from memweb.schemas import ErrorOut
from orbs.errors import BankArchived, OrbsError
from orbs.models import MemoryBank, Orb, Source
from orbs.services import dialogue_window, orb_from_episode, orbs_retrieve
from orbs.services.deletion import bank_open_check, orb_delete
from orbs.vocabulary import OrbsScope

router = Router(tags=["memory-layer contract"])
READ = api_auth(Role.OPERATOR, scope=OrbsScope.MEMORY_READ)
WRITE = api_auth(Role.OPERATOR, scope=OrbsScope.MEMORY_WRITE)
REFUSALS = {404: ErrorOut, 409: ErrorOut, 422: ErrorOut}
NAME_CHARS = 100  # a tool name in an Orb trajectory (orbs.schemas.MessageIn)
SERVICE_VERSION = "1"  # how memweb serves a bank over the contract; bump when what it serves changes


def _bank(request, slug: str, *, writing: bool = False) -> MemoryBank:
    bank = get_object_or_404(MemoryBank, slug=slug)
    try:
        bank_open_check(bank)
    except BankArchived as archived:
        if writing:
            raise HttpError(409, str(archived)) from None
    return bank


def _speaks(body: LayerNamespaceIn) -> None:
    if major_version(body.contract_version) != major_version(CONTRACT_VERSION):
        raise HttpError(422, f"contract_version {body.contract_version} is not one this memweb speaks "
                             f"({CONTRACT_VERSION})")


def _label(namespace: str) -> str:
    """The source label of the Orbs a namespace's learn calls write: how reset and snapshot find them."""
    return f"memory-layer contract · {namespace}"


def _namespace_orbs(bank: MemoryBank, namespace: str):
    return Orb.objects.filter(bank=bank, source_label=_label(namespace)).exclude(status=Orb.Status.DELETED)


def _message(message) -> dict:
    """A contract message as an Orb trajectory's, whose names are shorter."""
    return {"role": message.role, "content": message.content, "tool_name": message.tool_name[:NAME_CHARS],
            "tool_calls": [{"name": call.name[:NAME_CHARS], "arguments": call.arguments} for call in message.tool_calls]}


@router.get("/contract.openapi.json", include_in_schema=False)
def contract_document(request):
    """The contract itself (docs/memory-layer-contract.openapi.json), for a harness to build its client
    from: any valid key, as memweb's own schema."""
    return JsonResponse(contract_openapi())


@router.get("/{slug}/describe", response={200: LayerDescribeOut, 404: ErrorOut}, auth=READ)
def describe(request, slug: str):
    """The bank as a memory layer: MemOrb's reviewed reflections."""
    bank = _bank(request, slug)
    return LayerDescribeOut(contract_version=CONTRACT_VERSION, name=f"memweb bank {bank.slug}",
                       version=SERVICE_VERSION, description=f"MemOrb: the reviewed policy reflections of memweb "
                                                            f"bank “{bank.name}”.")


@router.post("/{slug}/retrieve", response={200: LayerRetrieveOut, **REFUSALS}, auth=READ)
def retrieve(request, slug: str, payload: LayerRetrieveIn):
    """The bank's reflections nearest to the situation, within the budget."""
    _speaks(payload)
    bank, situation = _bank(request, slug), payload.situation
    history = dialogue_window([m.model_dump() for m in payload.dialogue])
    try:
        result = orbs_retrieve(bank=bank, query=situation.text, k=payload.budget.items, client="memory-layer contract",
                               context={"task_id": situation.task_id, "domain": situation.domain,
                                        "turn": situation.turn, "history": history})
    except OrbsError as refused:
        raise HttpError(422, str(refused)) from None
    block, _ = budget_cut(result.prompt_block, payload.budget.tokens)
    served = [hit for hit in result.hits if hit.injected]
    return LayerRetrieveOut(prompt_block=block, items=[{"id": str(hit.orb.pk), "text": hit.orb.outcome,
                                                   "score": hit.score} for hit in served])


@router.post("/{slug}/learn", response={200: LayerLearnOut, **REFUSALS}, auth=WRITE)
def learn(request, slug: str, payload: LayerLearnIn):
    """The episode reflected into an Orb (the same episode twice is one Orb)."""
    _speaks(payload)
    bank, episode = _bank(request, slug, writing=True), payload.episode
    metadata = {"user_feedback": episode.feedback.model_dump()} if episode.feedback else {}
    trajectory = {"task_id": episode.task_id or episode.episode_ref, "domain": episode.domain or "unknown",
                  "customer_key": episode.customer_key, "reward": episode.reward, "success": episode.success,
                  "reward_breakdown": episode.reward_components, "metadata": metadata,
                  "messages": [_message(m) for m in episode.dialogue]}
    try:
        result = orb_from_episode(bank=bank, trajectory=trajectory, source_label=_label(payload.namespace),
                                  episode_ref=episode.episode_ref, source=Source.API)
    except OrbsError as refused:
        raise HttpError(422, str(refused)) from None
    return LayerLearnOut(learned=int(result.created), item_ids=[str(result.orb.pk)])


@router.post("/{slug}/reset", response={200: LayerResetOut, **REFUSALS}, auth=WRITE)
def reset(request, slug: str, payload: LayerNamespaceIn):
    """The namespace's Orbs soft-deleted (their history kept); the bank's own memories stay."""
    _speaks(payload)
    bank = _bank(request, slug, writing=True)
    with transaction.atomic():
        orbs = list(_namespace_orbs(bank, payload.namespace).values_list("pk", "version"))
        for orb_id, version in orbs:
            orb_delete(orb_id=orb_id, expected_version=version, actor=request.auth,
                       reason=f"reset of namespace {payload.namespace} over the memory-layer contract")
    return LayerResetOut(removed=len(orbs))


@router.post("/{slug}/snapshot", response={200: LayerSnapshotOut, **REFUSALS}, auth=READ)
def snapshot(request, slug: str, payload: LayerNamespaceIn):
    """How many Orbs the namespace's learn calls wrote that are still there, and a digest of them."""
    _speaks(payload)
    orbs = list(_namespace_orbs(_bank(request, slug), payload.namespace).order_by("pk").values_list("pk", "version"))
    return LayerSnapshotOut(items=len(orbs), digest=hashlib.sha256(repr(orbs).encode()).hexdigest()[:32])
