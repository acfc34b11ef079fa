"""Episodes as timelines of spans: what is recorded while an episode plays (steps, tool calls,
retrievals, LLM calls linked to the episode and its turn), the transcript as the customer saw it,
and one turn count everywhere."""
import re

import pytest
from django.urls import reverse

from evaluation.models import Episode
from evaluation.services import episode_run, episode_trajectory
from memweb.llm.config import ModelPrice
from memweb.models import LLMCall
from orbs.services import bank_get_or_create, orb_from_episode
from tests.browser import login

RATES = {"wrong_tool": 0.6, "wrong_arguments": 0.6, "result_unused": 0.6}


@pytest.fixture
def operator(client, operator_user):
    client.force_login(operator_user)
    return client


def _task(builtin, template: str):
    return next(t for t in builtin.tasks.order_by("external_id") if t.spec["template"] == template)


def _drawn_turns(page: str) -> list[str]:
    return re.findall(r'class="turn-label small muted">Turn (\d+)<', page)


def test_an_offline_episode_records_its_steps_as_scripted_spans(builtin, operator):
    bank = bank_get_or_create(name="traces", auto_approve="always", approved_only=False, retrieval_k=3,
                              prompt_token_budget=120)
    for task in list(builtin.tasks.order_by("external_id"))[:3]:
        orb_from_episode(bank=bank, trajectory=episode_trajectory(episode_run(task=task, agent_config={
            "error_rates": RATES}, seed=1)), source_label="seed")
    task = _task(builtin, "track_order_no_id")
    episode = episode_run(task=task, memory_config={"kind": "memorb", "bank": bank.name, "approved_only": False},
                          seed=3)
    kinds = [(span["turn"], span["kind"]) for span in episode.spans]
    assert kinds[0] == (1, "customer") and (1, "memory") in kinds and (1, "agent") in kinds
    tools = [span for span in episode.spans if span["kind"] == "tool"]
    call_ids = [c["id"] for m in episode.transcript for c in m.get("tool_calls", ())]
    assert [span["call_id"] for span in tools] == call_ids and all(span["ms"] >= 0 for span in tools)
    assert {span["backend"] for span in episode.spans if span["kind"] == "agent"} == {"scripted"}
    timings = episode.memories[0]["timings"]
    assert set(timings) == {"rewrite_ms", "embed_ms", "search_ms"} and timings["embed_ms"] > 0
    assert episode.trace_id is not None and not LLMCall.objects.exists()

    page = operator.get(reverse("evaluation:episode_detail", args=[episode.pk])).content.decode()
    assert page.count('data-span="agent"') == episode.turns  # one agent span per turn, each labelled scripted
    assert 'data-span="memory"' in page and "embed " in page and "cut by the prompt budget" in page
    assert page.count('data-span="tool"') == len(call_ids)
    assert re.search(r'id="episode-cost">\$0<', page) and "scripted: no LLM call" in page


def test_an_llm_episode_links_its_calls_to_the_episode_and_its_turns(builtin, fake_llm, operator, settings):
    fake_llm.use_for("actor")
    settings.LLM_PRICES = {"fake-model": ModelPrice(prompt=1.0, completion=2.0)}
    task = _task(builtin, "track_order")
    spec = task.spec
    for call in (spec["gold_lookups"][0], spec["gold_lookups"][-1]):
        fake_llm.reply_tool_call(call["name"], call["arguments"])
    fake_llm.reply_text("Your order is on its way: " + ", ".join(o["value"] for o in spec["required_outputs"]))
    LLMCall.objects.create(role="actor", model="fake-model", base_url="x", status="ok", tokens_in=999)  # untraced

    episode = episode_run(task=task, agent_config={"backend": "llm"}, seed=0)
    calls = list(LLMCall.objects.filter(trace_id=episode.trace_id).order_by("pk"))
    assert len(calls) == len(fake_llm.chat_requests) >= 3
    assert {(c.role, c.turn) for c in calls[:3]} == {("actor", 1)} and all(c.tokens_in > 0 for c in calls)
    assert sum(c.tokens_in for c in calls) == episode.tokens_in

    page = operator.get(reverse("evaluation:episode_detail", args=[episode.pk])).content.decode()
    assert page.count('data-span="llm"') == len(calls)
    tokens_in, tokens_out = sum(c.tokens_in for c in calls), sum(c.tokens_out for c in calls)
    assert f'id="episode-tokens">{tokens_in + tokens_out}<' in page
    assert f"${(tokens_in + 2 * tokens_out) / 1e6:.4f}" in page  # priced from MEMWEB_LLM_PRICES
    assert '<tr data-role="actor">' in page


def test_the_stop_token_is_hidden_and_the_turn_counts_agree(builtin, operator):
    task = _task(builtin, "track_order_no_id")
    episode = episode_run(task=task, seed=5)
    assert episode.ended_by == Episode.EndedBy.STOP and "###STOP###" in episode.transcript[-1]["content"]  # stored
    page = operator.get(reverse("evaluation:episode_detail", args=[episode.pk])).content.decode()
    assert "###STOP###" not in page and "Conversation ended by the customer" in page
    drawn = _drawn_turns(page)
    assert drawn == [str(n) for n in range(1, episode.turns + 1)] and "Closing message" in page
    api = operator.get(f"/api/evaluation/episodes/{episode.pk}").json()
    listed = operator.get("/api/evaluation/episodes").json()
    assert api["turns"] == episode.turns == next(e["turns"] for e in listed if e["id"] == episode.pk)


def test_an_episode_cut_short_by_the_llm_counts_the_turns_it_drew(builtin, fake_llm, operator):
    fake_llm.use_for("actor", max_retries=0)
    task = _task(builtin, "track_order")
    fake_llm.reply_tool_call(task.spec["gold_lookups"][0]["name"], task.spec["gold_lookups"][0]["arguments"])
    fake_llm.fail(500, "the model crashed")
    episode = episode_run(task=task, agent_config={"backend": "llm"}, seed=0)
    assert episode.status == Episode.Status.ERROR
    assert {m.get("turn") for m in episode.transcript} == {1}  # the failed turn's tool calls keep their turn
    page = operator.get(reverse("evaluation:episode_detail", args=[episode.pk])).content.decode()
    assert episode.turns == len(_drawn_turns(page)) == 1
    failed = LLMCall.objects.get(trace_id=episode.trace_id, status=LLMCall.Status.ERROR)
    assert failed.turn == 1 and 'class="badge badge-failed"' in page


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_timeline_page_in_a_browser(browser_page, live_server, operator_user, builtin):
    episode = episode_run(task=_task(builtin, "track_order_no_id"), seed=5)
    page = browser_page
    login(page, live_server, operator_user)
    page.goto(live_server.url + reverse("evaluation:episode_detail", args=[episode.pk]))
    timeline = page.locator("ol.timeline")
    # Every step is a span with its time; offline steps say they are scripted.
    assert timeline.locator('[data-span="agent"]').count() == episode.turns
    assert timeline.locator('[data-span="agent"] .badge-scripted').count() == episode.turns
    # Turn counts agree: the number on the page is the number of turns drawn.
    assert page.locator("#episode-turns").inner_text() == str(episode.turns)
    assert timeline.get_by_text("Turn", exact=False).count() == episode.turns
    # The stop token is hidden; a marker says the customer ended the conversation.
    assert "###STOP###" not in page.content()
    assert timeline.get_by_role("note").inner_text() == "Conversation ended by the customer"
    # A tool call opens onto its result.
    first_tool = timeline.locator('[data-span="tool"]').first
    first_tool.locator("summary").click()
    assert first_tool.locator("pre").is_visible()
