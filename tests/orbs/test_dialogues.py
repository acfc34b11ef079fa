"""The raw-dialogue memory (MemoryBench's naive retrieval baselines): dialogues stored once with
their messages and vectors, each of the four (method, unit) pairs ranks the planted unit first,
k and the token budget hold, and a source bank's dialogues copy across."""
import pytest

from memweb.embeddings import embedder
from orbs.dialogues.models import Dialogue, DialogueMessage
from orbs.dialogues.services import (
    PROMPT_HEADER,
    DialogueHit,
    dialogue_from_trajectory,
    dialogues_copy,
    dialogues_retrieve,
    prompt_block_fill,
)
from orbs.errors import InvalidTrajectory
from orbs.services import bank_get_or_create

CONVERSATIONS = {
    "sofa": ["I need to change the delivery address for the sofa I ordered.",
             "Of course. Which address should the sofa go to instead?",
             "Please send it to 12 Harbour Street."],
    "headphones": ["My wireless headphones arrived with a cracked left earcup.",
                   "I'm sorry about the damaged earcup. I can send a replacement pair today.",
                   "Thanks, a replacement is fine."],
    "yoga": ["When will I get the refund for the yoga mat I sent back?",
             "Your refund for the yoga mat was issued yesterday; it takes three to five days."],
}
# The planted dialogue, stored second, and queries that share its topic (not every word).
PLANTED = "headphones"
MESSAGE_QUERY = "the earcup on my headphones is cracked"
DIALOGUE_QUERY = "my new headphones came broken, the earcup has a crack"
MODES = [("bm25", "message"), ("bm25", "dialogue"), ("embedder", "message"), ("embedder", "dialogue")]


def conversation(lines: list[str], *, task_id: str = "shop-app-001") -> dict:
    """Customer and agent take turns, starting with the customer; the agent looks something up once."""
    messages = [{"role": "user" if n % 2 == 0 else "assistant", "content": text} for n, text in enumerate(lines)]
    messages[1:1] = [{"role": "assistant", "content": "", "tool_calls": [{"name": "get_order", "arguments": {}}]},
                     {"role": "tool", "tool_name": "get_order", "content": '{"order_id": "W1"}'}]
    return {"task_id": task_id, "domain": "appliances", "messages": messages, "reward": 1.0, "success": True}


@pytest.fixture
def corpus(db):
    bank = bank_get_or_create(name="raw dialogues")
    for name, lines in CONVERSATIONS.items():
        dialogue_from_trajectory(bank=bank, trajectory=conversation(lines), dialogue_ref=f"test:{name}")
    return bank


def test_it_stores_a_dialogue_once_with_its_spoken_messages(corpus):
    dialogue = Dialogue.objects.get(bank=corpus, dialogue_ref=f"test:{PLANTED}")
    lines = CONVERSATIONS[PLANTED]
    assert dialogue.opening == lines[0] and dialogue.embedding_model == corpus.embedding_model
    assert dialogue.text == f"customer: {lines[0]}\nagent: {lines[1]}\ncustomer: {lines[2]}"
    # The tool call (no words) and the tool result are not dialogue.
    assert list(dialogue.messages.order_by("position").values_list("position", "role", "text")) == [
        (0, "customer", lines[0]), (1, "agent", lines[1]), (2, "customer", lines[2])]
    again = dialogue_from_trajectory(bank=corpus, trajectory=conversation(["something else"]),
                                     dialogue_ref=f"test:{PLANTED}")
    assert again == dialogue and DialogueMessage.objects.filter(bank=corpus).count() == 8


def test_it_refuses_a_bad_trajectory_naming_the_field_and_writes_nothing(corpus):
    with pytest.raises(InvalidTrajectory) as error:
        dialogue_from_trajectory(bank=corpus, trajectory={**conversation(["hello"]), "reward": "lots"},
                                 dialogue_ref="test:bad")
    assert any(field == "reward" for field, _ in error.value.problems)
    silent = {**conversation(["hello"]), "messages": [{"role": "assistant", "content": "Hello?"}]}
    with pytest.raises(InvalidTrajectory) as error:  # a dialogue is matched on what the customer said
        dialogue_from_trajectory(bank=corpus, trajectory=silent, dialogue_ref="test:silent")
    assert any(field == "messages" for field, _ in error.value.problems)
    assert not Dialogue.objects.filter(dialogue_ref__in=["test:bad", "test:silent"]).exists()


@pytest.mark.parametrize(("method", "unit"), MODES)
def test_each_mode_ranks_the_planted_unit_first_within_k_and_the_budget(corpus, method, unit):
    query = MESSAGE_QUERY if unit == "message" else DIALOGUE_QUERY
    result = dialogues_retrieve(bank=corpus, query=query, method=method, unit=unit, k=5)
    best = result.hits[0]
    assert best.rank == 1 and best.dialogue_ref == f"test:{PLANTED}" and best.injected
    if unit == "message":
        assert (best.role, best.text) == ("customer", CONVERSATIONS[PLANTED][0])
        assert best.unit_id == DialogueMessage.objects.get(bank=corpus, text=best.text).pk
    else:
        assert best.role == "" and best.text.startswith(f"customer: {CONVERSATIONS[PLANTED][0]}\nagent:")
    assert [h.rank for h in result.hits] == list(range(1, len(result.hits) + 1))
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)
    assert result.prompt_block.startswith(PROMPT_HEADER) and CONVERSATIONS[PLANTED][0] in result.prompt_block
    assert result.token_budget == corpus.prompt_token_budget  # the same budget MemOrb gets
    broad = "sofa headphones yoga mat refund"
    assert len(dialogues_retrieve(bank=corpus, query=broad, method=method, unit=unit, k=5).hits) >= 2
    assert len(dialogues_retrieve(bank=corpus, query=broad, method=method, unit=unit, k=1).hits) == 1
    tight = dialogues_retrieve(bank=corpus, query=broad, method=method, unit=unit, k=5, token_budget=30)
    assert tight.budget_used == embedder().count_tokens(tight.prompt_block) <= 30
    assert [h.injected for h in tight.hits] != [True] * len(tight.hits)  # something had to stay out


def test_bm25_finds_nothing_for_a_query_sharing_no_word(corpus):
    result = dialogues_retrieve(bank=corpus, query="zeppelin", method="bm25", unit="message", k=5)
    assert result.hits == [] and result.prompt_block == "" and result.budget_used == 0


def test_a_new_dialogue_is_found_by_bm25_at_once(corpus):
    """The index of an unchanged corpus is reused; a grown corpus is indexed anew."""
    assert not dialogues_retrieve(bank=corpus, query="zeppelin", method="bm25", unit="dialogue", k=5).hits
    dialogue_from_trajectory(bank=corpus, trajectory=conversation(["Where is my zeppelin model kit?", "On its way."]),
                             dialogue_ref="test:zeppelin")
    hits = dialogues_retrieve(bank=corpus, query="zeppelin", method="bm25", unit="dialogue", k=5).hits
    assert [h.dialogue_ref for h in hits] == ["test:zeppelin"]


def test_an_unknown_method_is_refused(corpus):
    with pytest.raises(ValueError, match="tfidf"):
        dialogues_retrieve(bank=corpus, query="sofa", method="tfidf", unit="message", k=5)


def test_the_budget_cuts_the_first_hit_that_does_not_fit_and_stops():
    def words(text: str) -> int:
        return len(text.split())

    long, short = (DialogueHit(unit_id=n, dialogue_id=n, dialogue_ref=f"d{n}", role="", rank=n, score=1 / n, text=t)
                   for n, t in ((1, " ".join(["word"] * 50)), (2, "short one")))
    header = words(PROMPT_HEADER)
    hits, block, used = prompt_block_fill(hits=[long, short], token_budget=header + 20, count_tokens=words)
    assert [(h.injected, h.truncated) for h in hits] == [(True, True), (False, False)]
    assert used == words(block) <= header + 20 and block.endswith("…") and "short one" not in block
    hits, block, _ = prompt_block_fill(hits=[short, long], token_budget=header + 200, count_tokens=words)
    assert [(h.injected, h.truncated) for h in hits] == [(True, False), (True, False)]
    hits, block, used = prompt_block_fill(hits=[long], token_budget=header + 3, count_tokens=words)
    assert (hits[0].injected, block, used) == (False, "", 0)  # not even a few words fit


def test_a_source_banks_dialogues_copy_once_into_another_bank(corpus):
    target = bank_get_or_create(name="run bank")
    assert dialogues_copy(source=corpus, target=target) == 3
    assert dialogues_copy(source=corpus, target=target) == 0
    assert DialogueMessage.objects.filter(bank=target).count() == DialogueMessage.objects.filter(bank=corpus).count()
    hits = dialogues_retrieve(bank=target, query=MESSAGE_QUERY, method="embedder", unit="message", k=5).hits
    assert hits[0].text == CONVERSATIONS[PLANTED][0]
    assert Dialogue.objects.get(pk=hits[0].dialogue_id).bank == target
