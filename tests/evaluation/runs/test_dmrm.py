"""DMRM as a run's memory: the run's parameters reach its bank, each trial's trajectories update the
target memory once, later trials retrieve them, MemOrb + DMRM serve both, a copied bank brings its
source memory, and the transcript links what the agent saw."""
import pytest
from django.urls import reverse

from evaluation.runs.models import EvaluationRun, Trial
from evaluation.runs.services import run_drive
from evaluation.runs.services.memory import trial_memorise
from orbs.dmrm.models import DMRMSettings, Experience, ExperienceTrajectory, SourceMemory
from orbs.dmrm.services import experience_review, source_memory_build
from orbs.services import bank_get_or_create
from tests.evaluation.runs.conftest import TASK_IDS
from tests.orbs.dmrm.conftest import shop_trajectory

PARAMS = {"alpha": 0.3, "gamma": 0.8, "c_max": 600, "n_success": 3, "suppression_mode": "down_weight",
          "source_weight": 0.25}


def _dmrm_records(row) -> list[dict]:
    return [m["dmrm"] for m in row.episode.memories if "dmrm" in m]


def test_a_dmrm_run_applies_its_parameters_to_its_own_bank(launch):
    run = launch(memory_mode="dmrm", dmrm=PARAMS)
    assert run.dmrm_config == PARAMS and run.uses_dmrm and not run.uses_memorb
    settings = DMRMSettings.objects.get(bank=run.bank)
    assert {name: getattr(settings, name) for name in PARAMS} == PARAMS


def test_without_parameters_the_defaults_are_kept_and_shown(launch):
    run = launch(memory_mode="dmrm")
    assert run.dmrm_config == {"alpha": 0.5, "gamma": 0.9, "c_max": 512, "n_success": 2,
                               "suppression_mode": "disable", "source_weight": 0.5}


def test_each_trial_updates_the_target_memory_and_later_trials_retrieve_it(launch):
    run = run_drive(run=launch(memory_mode="dmrm"))
    assert run.status == EvaluationRun.Status.COMPLETED
    rows = list(run.run_episodes.select_related("episode", "trial").order_by("trial__number", "task_key"))
    retrieved = {n: sum(len(r["hits"]) for row in rows if row.trial.number == n for r in _dmrm_records(row))
                 for n in (1, 2, 3)}
    assert retrieved[1] == 0 and retrieved[2] > 0 and retrieved[3] > 0  # memory is never reset
    target = Experience.objects.filter(bank=run.bank, memory=Experience.Memory.TARGET)
    assert target.exists() and not Experience.objects.filter(bank=run.bank, memory=Experience.Memory.SOURCE).exists()
    # One trajectory per played episode, keyed by the episode; the trials count the steps they wrote.
    trajectories = ExperienceTrajectory.objects.filter(bank=run.bank)
    assert set(trajectories.values_list("trajectory_id", flat=True)) == {
        f"evaluation-episode:{row.episode_id}" for row in rows if row.episode.tool_calls}
    assert sum(run.trial_rows.values_list("experiences_written", flat=True)) == sum(
        trajectories.values_list("steps", flat=True)) > 0
    assert all(row.orb_id is None for row in rows)  # DMRM alone writes no Orbs
    hit = next(h for row in rows for r in _dmrm_records(row) for h in r["hits"])
    assert target.filter(pk=hit["experience_id"]).exists() and hit["memory"] == "target"


def test_a_repeated_trial_finish_writes_nothing_twice(launch):
    run = run_drive(run=launch(memory_mode="dmrm", trials=1))
    before = list(Experience.objects.filter(bank=run.bank).order_by("pk").values_list("pk", "visits", "q_value"))
    trial = Trial.objects.select_related("run", "run__bank").get(run=run)
    trial_memorise(trial=trial)
    after = list(Experience.objects.filter(bank=run.bank).order_by("pk").values_list("pk", "visits", "q_value"))
    assert after == before
    assert Trial.objects.get(pk=trial.pk).experiences_written == trial.experiences_written > 0


def test_memorb_and_dmrm_together_serve_both_memories(launch):
    run = run_drive(run=launch(memory_mode="both", trials=2))
    rows = run.run_episodes.filter(trial__number=2).select_related("episode")
    records = [m for row in rows for m in row.episode.memories]
    assert records and all("hits" in m and "dmrm" in m and "retrieval_id" in m for m in records)
    assert any(m["hits"] for m in records) and any(m["dmrm"]["hits"] for m in records)
    assert run.bank.orbs.exists() and Experience.objects.filter(bank=run.bank).exists()
    assert all(row.orb_id for row in run.run_episodes.all())


def test_a_copied_bank_brings_its_source_memory_and_leaves_the_original_alone(launch):
    team = bank_get_or_create(name="team experience", approved_only=True)
    memory = source_memory_build(bank=team, name="clothing", source_domain="clothing", gamma=0.9, min_reward=1.0,
                                 min_q=0.0, trajectories=[shop_trajectory("shop-clo-001")])
    for entry in Experience.objects.filter(source_memory=memory):
        experience_review(experience_id=entry.pk, expected_version=entry.version, status="approved", actor=None)
    run = launch(memory_mode="dmrm", bank_source="team-experience", trials=1)
    copied = Experience.objects.filter(bank=run.bank, memory=Experience.Memory.SOURCE)
    assert copied.count() == 2 and set(copied.values_list("status", flat=True)) == {"approved"}
    assert SourceMemory.objects.get(bank=run.bank).name == "clothing"
    assert copied.first().source_memory.bank == run.bank
    run = run_drive(run=run)
    seen = {h["memory"] for row in run.run_episodes.select_related("episode") for r in _dmrm_records(row)
            for h in r["hits"]}
    assert "source" in seen  # trial 1 starts from the copied source memory
    assert Experience.objects.filter(bank=team).count() == 2  # the source bank is never written


@pytest.fixture
def operator(client, operator_user):
    client.force_login(operator_user)
    return client


def test_the_form_launches_a_dmrm_run_and_the_pages_show_it(operator, builtin):
    response = operator.post(reverse("evaluation:run_new"), {
        "name": "dmrm from the form", "task_ids": " ".join(TASK_IDS), "agent": "scripted", "wrong_tool": "0.6",
        "wrong_arguments": "0", "result_unused": "0", "customer": "agenda", "memory_mode": "dmrm", "memory_k": "5",
        "per_turn": "on", "trials": "2", "seed": "0", "max_turns": "12", "concurrency": "4", "review_gate": "auto",
        "dmrm_alpha": "0.4", "dmrm_gamma": "0.9", "dmrm_c_max": "300", "dmrm_n_success": "2",
        "dmrm_suppression_mode": "disable", "dmrm_source_weight": "0.5"})
    run = EvaluationRun.objects.get()
    assert response.status_code == 302 and run.dmrm_config["alpha"] == 0.4 and run.dmrm_config["c_max"] == 300
    run = run_drive(run=run)
    page = operator.get(run.get_absolute_url()).content.decode()
    assert "DMRM steps written" in page and "C_max=300 tokens" in page
    row = next(r for r in run.run_episodes.filter(trial__number=2).select_related("episode")
               if any(rec["hits"] for rec in _dmrm_records(r)))
    transcript = operator.get(row.episode.get_absolute_url()).content.decode()
    hit = _dmrm_records(row)[0]["hits"][0]
    assert f"?experience={hit['experience_id']}" in transcript and "DMRM experience" in transcript
    browser = operator.get(reverse("orbs:experience_list"), {"experience": hit["experience_id"]}).content.decode()
    assert f'id="experience-{hit["experience_id"]}"' in browser and "(1 experience)" in browser


def test_a_bad_dmrm_parameter_shows_on_its_field(operator, builtin):
    response = operator.post(reverse("evaluation:run_new"), {
        "name": "bad", "agent": "scripted", "wrong_tool": "0", "wrong_arguments": "0", "result_unused": "0",
        "customer": "agenda", "memory_mode": "dmrm", "memory_k": "5", "trials": "2", "seed": "0",
        "max_turns": "12", "concurrency": "2", "review_gate": "auto", "dmrm_c_max": "5"})
    assert response.status_code == 422 and response.context["form"].errors["dmrm_c_max"]
    assert not EvaluationRun.objects.exists()
