"""Naive-RAG baselines (MemoryBench's bm25_message, bm25_dialog, embedder_message, embedder_dialog)
as a run's memory: the launch form and the API take them, the run's raw-dialogue memory grows at
each trial's end, later trials retrieve from it, the transcript shows the hits, and a MemOrb run
compares against a naive-RAG run on the compare page."""
import json

import pytest
from django.urls import reverse

from evaluation.configs import MemoryKind
from evaluation.memory_layers.naive_rag import NAIVE_RAG_LAYERS, NaiveRAGLayer
from evaluation.runs.models import EvaluationRun, Trial
from evaluation.runs.services import run_drive, runs_compare
from evaluation.runs.services.memory import trial_memorise
from memweb.models import ApiKey
from orbs.dialogues.models import Dialogue, DialogueMessage
from orbs.dialogues.services import dialogue_from_trajectory
from orbs.services import bank_get_or_create
from tests.evaluation.runs.conftest import TASK_IDS, spec

MODES = [layer.name for layer in NAIVE_RAG_LAYERS]


def _rag_records(row) -> list[dict]:
    return [m["dialogue"] for m in row.episode.memories if "dialogue" in m]


@pytest.mark.parametrize("mode", MODES)
def test_a_naive_rag_run_retrieves_its_past_dialogues_from_trial_two_on(launch, mode):
    run = run_drive(run=launch(memory_mode=mode, trials=2, concurrency=1, task_ids=TASK_IDS[:2]))
    assert run.status == EvaluationRun.Status.COMPLETED and isinstance(run.memory_layer, NaiveRAGLayer)
    assert run.run_spec.withhold_probability == 0.0  # raw dialogues are never withheld
    rows = list(run.run_episodes.select_related("episode", "trial").order_by("trial__number", "task_key"))
    records = {n: [r for row in rows if row.trial.number == n for r in _rag_records(row)] for n in (1, 2)}
    assert records[1] and all(r["hits"] == [] for r in records[1])  # trial 1 starts from an empty memory
    hits = [h for r in records[2] for h in r["hits"]]
    assert hits and all(r["mode"] == mode and r["k"] == 5 and r["budget_used"] <= r["token_budget"] for r in records[2])
    trial_one = {f"evaluation-episode:{row.episode_id}" for row in rows if row.trial.number == 1}
    assert {h["dialogue_ref"] for h in hits} <= trial_one  # only what was played before the trial
    assert any(h["injected"] for h in hits) and all(r["prompt_block"] for r in records[2] if r["hits"])
    # The corpus holds every finished episode, written at its trial's end; no Orbs.
    assert set(Dialogue.objects.filter(bank=run.bank).values_list("dialogue_ref", flat=True)) == {
        f"evaluation-episode:{row.episode_id}" for row in rows}
    assert not run.bank.orbs.exists() and all(row.orb_id is None for row in rows)
    unit = DialogueMessage if mode.endswith("message") else Dialogue
    assert unit.objects.filter(pk=hits[0]["unit_id"], bank=run.bank).exists()


def test_a_repeated_trial_finish_writes_no_dialogue_twice(launch):
    run = run_drive(run=launch(memory_mode=MemoryKind.BM25_MESSAGE, trials=1))
    before = list(DialogueMessage.objects.filter(bank=run.bank).values_list("pk", flat=True))
    trial_memorise(trial=Trial.objects.select_related("run", "run__bank").get(run=run))
    assert list(DialogueMessage.objects.filter(bank=run.bank).values_list("pk", flat=True)) == before != []


def test_a_run_from_a_source_bank_starts_with_its_dialogues(launch):
    team = bank_get_or_create(name="team dialogues")
    dialogue_from_trajectory(bank=team, dialogue_ref="elsewhere:1", trajectory={
        "task_id": "x", "domain": "appliances", "reward": 1.0, "success": True,
        "messages": [{"role": "user", "content": "Hello, I need help with an order"}]})
    run = launch(memory_mode=MemoryKind.EMBEDDER_DIALOG, bank_source=team.slug)
    assert list(Dialogue.objects.filter(bank=run.bank).values_list("dialogue_ref", flat=True)) == ["elsewhere:1"]
    assert Dialogue.objects.filter(bank=team).count() == 1  # the source is left alone


def test_the_transcript_shows_the_naive_rag_hits_labelled_by_mode(client, operator_user, launch):
    run = run_drive(run=launch(memory_mode=MemoryKind.BM25_DIALOG, trials=2))
    row = next(row for row in run.run_episodes.filter(trial__number=2).select_related("episode")
               if any(r["hits"] for r in _rag_records(row)))
    hit = next(h for r in _rag_records(row) for h in r["hits"])
    client.force_login(operator_user)
    page = client.get(reverse("evaluation:episode_detail", args=[row.episode_id])).content.decode()
    assert 'data-memory="naive-rag"' in page and "naive RAG: BM25 over past dialogues" in page
    assert hit["dialogue_ref"] in page and "past dialogue" in page


def test_the_launch_form_offers_and_launches_the_naive_rag_modes(client, operator_user, builtin):
    client.force_login(operator_user)
    form = client.get(reverse("evaluation:run_new")).content.decode()
    for layer in NAIVE_RAG_LAYERS:
        assert f'<option value="{layer.name}">{layer.label}</option>' in form
    response = client.post(reverse("evaluation:run_new"), {
        "name": "naive rag", "task_ids": ", ".join(TASK_IDS), "agent": "scripted", "wrong_tool": "0.3",
        "wrong_arguments": "0.3", "result_unused": "0.3", "customer": "agenda", "memory_mode": "embedder_message",
        "memory_k": "5", "per_turn": "on", "trials": "2", "seed": "0", "max_turns": "12", "concurrency": "2",
        "review_gate": "auto"})
    run = EvaluationRun.objects.get()
    assert response.status_code == 302 and run.memory_mode == "embedder_message" and run.bank is not None


def test_the_api_launches_a_naive_rag_run_and_refuses_an_unknown_mode(client, operator_user, builtin):
    _, secret = ApiKey.issue(user=operator_user, name="baselines")
    headers = {"content_type": "application/json", "HTTP_AUTHORIZATION": f"Bearer {secret}"}
    response = client.post("/api/evaluation/runs/", json.dumps(spec(memory_mode="bm25_dialog", trials=1)), **headers)
    assert response.status_code == 201 and response.json()["memory_mode"] == "bm25_dialog"
    response = client.post("/api/evaluation/runs/", json.dumps(spec(memory_mode="bm25_everything")), **headers)
    assert response.status_code == 422 and response.json()["detail"][0]["loc"][-1] == "memory_mode"
    assert EvaluationRun.objects.count() == 1


def test_a_memorb_run_and_a_naive_rag_run_compare_with_their_paired_difference(launch):
    memorb = run_drive(run=launch(name="MemOrb", trials=1))
    naive = run_drive(run=launch(name="naive RAG", memory_mode=MemoryKind.BM25_MESSAGE, trials=1))
    comparison = runs_compare(runs=[memorb, naive])
    pair = comparison["pairs"][0]
    assert pair["run"] == naive and pair["baseline"] == memorb
    tasks = len(TASK_IDS)
    expected = (naive.run_episodes.filter(success=True).count() - memorb.run_episodes.filter(success=True).count()) / tasks
    assert pair["success"]["tasks"] == tasks and pair["success"]["estimate"] == pytest.approx(expected)
    assert len(pair["flips"]) == tasks
