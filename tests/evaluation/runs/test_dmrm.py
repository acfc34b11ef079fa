"""DMRM as a run's memory: the run's parameters reach its bank, each trial's trajectories update the
target memory once, later trials retrieve them, MemOrb + DMRM serve both, a copied bank brings its
source memory, and the transcript links what the agent saw."""
import pytest
from django.urls import reverse

from evaluation.environments.shop import SHOP
from evaluation.llm_backends import memory_room
from evaluation.memory_layers.dmrm import run_episode_dmrm_record
from evaluation.models import Episode
from evaluation.runs.models import EvaluationRun, Trial
from evaluation.runs.services import RunLaunchError, run_drive
from evaluation.runs.services.memory import trial_memorise
from evaluation.runs.services.spec import DMRM_N_SWEEP
from evaluation.services.memory_effects import bank_harmful_experiences_flag, experience_effects_compute
from memweb.embeddings import embedder
from memweb.llm import role_config
from orbs.dmrm.models import DMRMRetrievalLog, DMRMSettings, Experience, ExperienceTrajectory, SourceMemory
from orbs.dmrm.services import source_memory_build
from orbs.services import bank_get_or_create
from tests.evaluation.runs.conftest import TASK_IDS
from tests.orbs.dmrm.conftest import shop_trajectory

PARAMS = {"alpha": 0.3, "gamma": 0.8, "c_max": 600, "n_success": 3, "suppression_mode": "down_weight",
          "source_weight": 0.25, "min_similarity": 0.2, "state_match": "similar", "state_similarity": 0.95,
          "write_timing": "trial_end"}


def _dmrm_records(row) -> list[dict]:
    return [m["dmrm"] for m in row.episode.memories if "dmrm" in m]


def test_a_dmrm_run_applies_its_parameters_to_its_own_bank(launch):
    run = launch(memory_mode="dmrm", dmrm=PARAMS)
    assert run.dmrm_config == PARAMS | {"c_max_rule": "given"}
    assert run.memory_layer.uses_dmrm_params and not run.memory_layer.reflects
    settings = DMRMSettings.objects.get(bank=run.bank)
    assert {name: getattr(settings, name) for name in PARAMS if name != "write_timing"} == {
        name: value for name, value in PARAMS.items() if name != "write_timing"}


def test_without_parameters_the_defaults_are_kept_and_shown(launch):
    run = launch(memory_mode="dmrm")
    assert run.dmrm_config == {"alpha": 0.5, "gamma": 0.9, "c_max": _window_room(4096), "n_success": 2,
                               "suppression_mode": "disable", "source_weight": 0.5, "min_similarity": 0.3,
                               "state_match": "exact", "state_similarity": 0.9, "write_timing": "episode",
                               "c_max_rule": "agent_window"}


def _window_room(context_tokens: int) -> int:
    return memory_room(context_tokens=context_tokens, answer_tokens=role_config("actor").max_tokens)


def test_c_max_is_the_agents_window_minus_the_rest_of_its_prompt_and_512_a_named_variant(launch):
    """It was 512 (MiniLM's window), which fits a median of one experience."""
    scripted = launch(memory_mode="dmrm")
    assert DMRMSettings.objects.get(bank=scripted.bank).c_max == _window_room(4096) > 2 * 512
    rules = embedder().count_tokens(SHOP.agent_policy())  # the rest of the prompt: rules, policies, the memory note
    assert 4096 - _window_room(4096) - role_config("actor").max_tokens > rules > 100
    wide = launch(memory_mode="dmrm", agent={"error_rates": {}, "context_tokens": 6000})
    assert wide.dmrm_config["c_max"] == _window_room(6000)
    old = launch(memory_mode="dmrm", dmrm={"c_max_rule": "minilm_512"})
    assert (old.dmrm_config["c_max"], old.dmrm_config["c_max_rule"]) == (512, "minilm_512")


def test_the_dmrm_presets_set_their_fields_and_refuse_others(launch):
    for n in DMRM_N_SWEEP:
        run = launch(memory_mode="dmrm", preset=f"dmrm_n{n}")
        assert (run.run_spec.preset, run.dmrm_config["n_success"]) == (f"dmrm_n{n}", n)
    fresh = launch(preset="dmrm_no_transfer", **{"memory_mode": "dmrm"})
    assert fresh.memory_mode == "dmrm" and not SourceMemory.objects.filter(bank=fresh.bank).exists()
    with pytest.raises(RunLaunchError) as refused:
        launch(memory_mode="dmrm", preset="dmrm_n1", dmrm={"n_success": 3})
    assert refused.value.problems == [("dmrm.n_success", "the preset dmrm_n1 sets dmrm.n_success to 1, got 3")]
    with pytest.raises(RunLaunchError) as refused:
        launch(memory_mode="dmrm", preset="dmrm_no_transfer", bank_source="some-bank")
    assert refused.value.problems[0][0] == "bank_source"


def test_at_trial_end_each_trial_updates_the_target_memory_and_later_trials_retrieve_it(launch):
    run = run_drive(run=launch(memory_mode="dmrm", dmrm={"write_timing": "trial_end"}))
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
    assert set(memory.experiences.values_list("status", flat=True)) == {"approved"}  # approved by the build
    # No withholding: which experiences a draw keeps out depends on their ids, which other tests move.
    run = launch(memory_mode="dmrm", bank_source="team-experience", trials=1, withhold_probability=0.0)
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
        "dmrm_suppression_mode": "disable", "dmrm_source_weight": "0.5", "dmrm_min_similarity": "0.25",
        "dmrm_state_match": "exact", "dmrm_write_timing": "trial_end"})
    run = EvaluationRun.objects.get()
    assert response.status_code == 302 and run.dmrm_config["alpha"] == 0.4 and run.dmrm_config["c_max"] == 300
    assert run.dmrm_config["write_timing"] == "trial_end" and run.dmrm_config["min_similarity"] == 0.25
    run = run_drive(run=run)
    page = operator.get(run.get_absolute_url()).content.decode()
    assert "DMRM steps written" in page and "C_max=300 tokens" in page
    assert "minimum similarity 0.25" in page and "target memory written at trial end" in page
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


def test_each_episode_writes_its_steps_as_it_is_stored_so_the_same_trial_retrieves_them(launch):
    """The paper's M_t grows as the agent acts; old code wrote only at trial end, so trial 1 saw nothing."""
    run = run_drive(run=launch(memory_mode="dmrm", trials=1, per_turn=True, withhold_probability=0.0))
    rows = list(run.run_episodes.select_related("episode").order_by("finished_at"))
    written = {f"evaluation-episode:{row.episode_id}": row.finished_at for row in rows}
    later = [(row, Experience.objects.get(pk=h["experience_id"]))
             for row in rows for r in _dmrm_records(row) for h in r["hits"]]
    assert later, "no episode of the trial retrieved an experience of an earlier one"
    for row, experience in later:
        assert written[experience.episode_ref] < row.finished_at  # written by an episode stored before
    trial = Trial.objects.select_related("run", "run__bank").get(run=run)
    before = list(Experience.objects.filter(bank=run.bank).order_by("pk").values_list("pk", "visits", "q_value"))
    trial_memorise(trial=trial)  # the trial's end finds every step written: exactly once per step
    assert list(Experience.objects.filter(bank=run.bank).order_by("pk").values_list("pk", "visits", "q_value")) == before
    assert Trial.objects.get(pk=trial.pk).experiences_written == sum(
        ExperienceTrajectory.objects.filter(bank=run.bank).values_list("steps", flat=True)) > 0
    records = DMRMRetrievalLog.objects.filter(bank=run.bank)
    assert records.exists() and not records.filter(success__isnull=True).exists()  # each knows its episode's ending


def test_withholding_draws_per_experience_and_logs_served_and_withheld(launch, operator):
    run = run_drive(run=launch(memory_mode="dmrm", trials=1, per_turn=True, memory_effects=True,
                                    withhold_probability=0.5))
    records = [r for row in run.run_episodes.select_related("episode") for r in _dmrm_records(row)]
    withheld = {pk for r in records for pk in r["withheld_ids"]}
    served = {pk for r in records for pk in r["served_ids"]}
    assert withheld and served
    for r in records:
        assert not set(r["withheld_ids"]) & {h["experience_id"] for h in r["hits"]}
        trace = DMRMRetrievalLog.objects.get(pk=r["retrieval_id"]).hits
        assert {h["experience_id"] for h in trace if h["withheld"]} == set(r["withheld_ids"])
    row = next(row for row in run.run_episodes.select_related("episode")
               if any(r["withheld_ids"] for r in _dmrm_records(row)))
    transcript = " ".join(operator.get(row.episode.get_absolute_url()).content.decode().split())
    assert "Withheld at random (to measure what each is worth): <a" in transcript
    effects = experience_effects_compute(experience_ids=sorted(served | withheld))
    assert sum(e.withheld for e in effects.values()) > 0 and sum(e.served for e in effects.values()) > 0


def _logged(bank, experience, *, episodes: int, withheld: bool, success: bool):
    for n in range(episodes):
        DMRMRetrievalLog.objects.create(
            bank=bank, goal="g", observation="o", suppressed=False, suppression_mode="disable",
            successful_trajectories=0, c_max=512, budget_used=0, episode_ref=f"{withheld}-{success}-{n}",
            success=success, hits=[{"experience_id": experience.pk, "included": not withheld, "withheld": withheld}])


def test_an_experience_that_lowers_success_is_flagged_and_ranked_first(operator, dmrm_bank):
    harmful, useful = Experience.objects.filter(bank=dmrm_bank).order_by("pk")[:2]
    _logged(dmrm_bank, harmful, episodes=20, withheld=False, success=False)
    _logged(dmrm_bank, harmful, episodes=20, withheld=True, success=True)
    _logged(dmrm_bank, useful, episodes=20, withheld=False, success=True)
    _logged(dmrm_bank, useful, episodes=20, withheld=True, success=False)
    assert bank_harmful_experiences_flag(bank=dmrm_bank) == [harmful.pk]
    assert bank_harmful_experiences_flag(bank=dmrm_bank) == []  # once
    harmful.refresh_from_db()
    assert harmful.flagged_at and "lowers success" in harmful.flag_note
    assert Experience.objects.filter(pk=harmful.pk, status="approved").exists()  # never rejected or deleted
    page = operator.get(reverse("evaluation:experience_effects", args=[dmrm_bank.slug]))
    assert [row["experience"].pk for row in page.context["rows"]] == [harmful.pk, useful.pk]
    assert "flagged" in page.content.decode()
    listed = operator.get(reverse("orbs:experience_list"), {"bank": dmrm_bank.slug, "flagged": "on"})
    assert [e.pk for e in listed.context["page"].object_list] == [harmful.pk]
    one = operator.get(reverse("evaluation:experience_effect", args=[harmful.pk]), HTTP_HX_REQUEST="true")
    assert "served 20 (0 ok) · withheld 20 (20 ok)" in " ".join(one.content.decode().split())


@pytest.fixture
def dmrm_bank(db):
    bank = bank_get_or_create(name="measured")
    source_memory_build(bank=bank, name="clothing", source_domain="clothing", gamma=0.9, min_reward=1.0, min_q=0.0,
                        trajectories=[shop_trajectory("shop-clo-001")])
    return bank


def test_an_episode_that_failed_on_infrastructure_writes_no_steps(launch):
    from evaluation.services import episode_run

    run = launch(memory_mode="dmrm", trials=1)
    task = run.task_set.tasks.get(external_id=TASK_IDS[0])
    broken, fine = episode_run(task=task, seed=0), episode_run(task=task, seed=1)
    Episode.objects.filter(pk=broken.pk).update(infra_error="actor endpoint timed out")
    broken.refresh_from_db()
    for episode in (broken, fine):
        run_episode_dmrm_record(episode=episode, run=run)
    assert list(ExperienceTrajectory.objects.filter(bank=run.bank).values_list("trajectory_id", flat=True)) == [
        f"evaluation-episode:{fine.pk}"]


def test_the_launch_form_runs_an_n_sweep_preset_over_the_pages_dmrm_values(builtin, client, operator_user):
    client.force_login(operator_user)
    form = client.get(reverse("evaluation:run_new")).content.decode()
    assert 'value="dmrm_n1"' in form and 'value="dmrm_no_transfer"' in form and 'name="dmrm_c_max_rule"' in form
    posted = {"name": "n = 1 from the form", "task_ids": "shop-app-001", "agent": "scripted", "wrong_tool": 0.3,
              "wrong_arguments": 0.3, "result_unused": 0.3, "customer": "agenda", "memory_mode": "dmrm",
              "memory_k": 5, "reflection_style": "simple", "preset": "dmrm_n1", "approved_only": "on",
              "per_turn": "on", "trials": 1, "seed": 0, "max_turns": 12, "concurrency": 1, "review_gate": "auto",
              "withhold_probability": 0, "dmrm_n_success": 2, "dmrm_c_max_rule": "minilm_512"}
    assert client.post(reverse("evaluation:run_new"), posted).status_code == 302
    run = EvaluationRun.objects.get(name="n = 1 from the form")
    assert (run.run_spec.preset, run.dmrm_config["n_success"], run.dmrm_config["c_max"]) == ("dmrm_n1", 1, 512)
