"""What a MemOrb agent sees each turn: the rewrite gets the running dialogue (q ⊕ C), and each turn's
record says how many retrieved Orbs reached the prompt."""
from django.urls import reverse

from evaluation.services import episode_run, episode_trajectory
from orbs.backends.rewriter import CONTEXT_CHARS, CONTEXT_MESSAGES, dialogue_window
from orbs.models import RetrievalLog
from orbs.services import bank_get_or_create, orb_from_episode

RATES = {"wrong_tool": 0.6, "wrong_arguments": 0.6, "result_unused": 0.6}


def _bank(builtin, *, budget: int | None = None):
    bank = bank_get_or_create(name="context", auto_approve="always", approved_only=False, prompt_token_budget=budget)
    for task in list(builtin.tasks.order_by("external_id"))[:3]:
        episode = episode_run(task=task, agent_config={"error_rates": RATES}, seed=1)
        orb_from_episode(bank=bank, trajectory=episode_trajectory(episode), source_label="seed")
    return bank


def _memorb(bank) -> dict:
    return {"kind": "memorb", "bank": bank.name, "approved_only": False, "per_turn": True}


def _episode_of_several_turns(builtin, bank):
    for task in builtin.tasks.order_by("external_id"):
        episode = episode_run(task=task, memory_config=_memorb(bank), seed=2)
        if len(episode.memories) >= 2:
            return episode
    raise AssertionError("no built-in task takes two turns")


def test_the_rewriter_gets_the_dialogue_so_far(builtin):
    bank = _bank(builtin)
    episode = _episode_of_several_turns(builtin, bank)
    first, second = (RetrievalLog.objects.get(pk=m["retrieval_id"]) for m in episode.memories[:2])
    assert first.context["history"] == []
    spoken = [m for m in episode.transcript if m["role"] in ("user", "assistant") and m.get("content")]
    opening, answer = spoken[0]["content"], next(m["content"] for m in spoken if m["role"] == "assistant")
    assert second.context["history"] == [{"role": "user", "content": opening}, {"role": "assistant", "content": answer}]
    # The scripted rewriter uses it too: the previous customer turn joins the current one.
    second_turn = episode.memories[1]["query"].lower().strip(" .!?")
    assert second.rewritten_query.startswith(second_turn[:20])
    assert opening.lower().split()[-1].strip(" .!?") in second.rewritten_query


def test_the_dialogue_window_is_bounded_and_keeps_the_latest():
    messages = [{"role": "user" if n % 2 else "assistant", "content": f"message {n} " + "x" * 500} for n in range(12)]
    messages.insert(5, {"role": "tool", "content": '{"order_id": "W1"}'})
    window = dialogue_window(messages)
    assert len(window) <= CONTEXT_MESSAGES and sum(len(m["content"]) for m in window) <= CONTEXT_CHARS
    assert window[-1] == {"role": "assistant" if 11 % 2 == 0 else "user", "content": messages[-1]["content"]}
    assert all(m["role"] in ("user", "assistant") for m in window)


def test_each_turn_says_how_many_retrieved_orbs_reached_the_prompt(builtin, client, operator_user):
    bank = _bank(builtin, budget=300)  # room for one or two of these entries
    task = builtin.tasks.order_by("external_id").first()
    episode = episode_run(task=task, agent_config={"error_rates": RATES}, memory_config=_memorb(bank), seed=2)
    record = episode.memories[0]
    assert record["retrieved"] == len(record["hits"]) == 3
    injected = record["injected"]
    assert injected == sum(hit["injected"] for hit in record["hits"]) and 0 < injected < 3
    client.force_login(operator_user)
    page = client.get(reverse("evaluation:episode_detail", args=[episode.pk])).content.decode()
    assert f"retrieved 3, injected {injected} before the agent answered" in page
