"""The naive-RAG hook (evaluation/memory_layers/naive_rag.py): memory_hook gives it for each of the four
kinds, it retrieves with the configured k (else the bank's), records the hits under "dialogue",
and once per episode it retrieves only before the first turn."""
import pytest

from evaluation.configs import MemoryConfig, MemoryKind
from evaluation.memory_layers.naive_rag import NAIVE_RAG_KINDS, DialogueHook
from evaluation.services.episodes import memory_hook
from orbs.dialogues.services import dialogue_from_trajectory
from orbs.services import bank_get_or_create

TASK = {"id": "shop-app-001", "domain": "appliances", "customer_id": "c1"}
OPENINGS = ["My blender stopped working after two days.", "I want to exchange my blue jacket for a larger size.",
            "Can you tell me when my blender replacement ships?"]


@pytest.fixture
def bank(db):
    bank = bank_get_or_create(name="past dialogues", retrieval_k=2)
    for n, opening in enumerate(OPENINGS):
        dialogue_from_trajectory(bank=bank, dialogue_ref=f"test:{n}", trajectory={
            "task_id": f"t{n}", "domain": "appliances", "reward": 1.0, "success": True,
            "messages": [{"role": "user", "content": opening}, {"role": "assistant", "content": "Let me check that."}]})
    return bank


def test_each_naive_rag_kind_gets_the_dialogue_hook(bank):
    for kind in NAIVE_RAG_KINDS:
        hook = memory_hook(config=MemoryConfig(kind=kind, bank=bank.slug), task=TASK)
        assert isinstance(hook, DialogueHook) and hook.retrieval_ids == []
    assert not isinstance(memory_hook(config=MemoryConfig(kind="memorb", bank=bank.slug), task=TASK), DialogueHook)


def test_it_records_what_the_agent_was_shown(bank):
    hook = memory_hook(config=MemoryConfig(kind=MemoryKind.BM25_DIALOG, bank=bank.slug), task=TASK)
    block, record = hook.before_turn(turn=1, query="my blender is broken", calls=[])
    rag = record["dialogue"]
    assert (record["turn"], record["query"]) == (1, "my blender is broken")
    assert (rag["mode"], rag["label"], rag["unit"]) == ("bm25_dialog", "naive RAG: BM25 over past dialogues", "dialogue")
    assert rag["k"] == 2 and len(rag["hits"]) == 2  # the bank's k: two blender dialogues share words with the query
    assert {h["dialogue_ref"] for h in rag["hits"]} == {"test:0", "test:2"}
    assert all(h["injected"] and h["text"] in block for h in rag["hits"]) and rag["prompt_block"] == block


def test_once_per_episode_it_keeps_the_first_block(bank):
    config = MemoryConfig(kind=MemoryKind.EMBEDDER_MESSAGE, bank=bank.slug, k=1, per_turn=False)
    hook = memory_hook(config=config, task=TASK)
    block, record = hook.before_turn(turn=1, query="exchange the jacket for a bigger size", calls=[])
    assert [h["text"] for h in record["dialogue"]["hits"]] == [OPENINGS[1]]
    assert hook.before_turn(turn=2, query="my blender", calls=[]) == (block, None)
