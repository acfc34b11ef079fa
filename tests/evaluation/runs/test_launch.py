"""Launching: validation names the field and writes nothing; a valid launch writes the run, its
bank and trials at once; a copied bank is the run's own."""
import json

import pytest
from django.urls import reverse

from evaluation.models import TaskSet
from evaluation.runs.models import EvaluationRun, RunEpisode, Trial
from evaluation.runs.services import RunActionError, RunLaunchError, run_cancel, run_drive, run_launch, run_resume
from evaluation.runs.services import launch as launch_module
from evaluation.runs.services.launch import run_preparation_job
from evaluation.services import episode_run, episode_trajectory
from memweb.jobs import job_execute
from memweb.models import Job
from orbs.models import MemoryBank, Orb
from orbs.services import bank_get_or_create, orb_from_episode
from tests.evaluation.runs.conftest import prepared, spec
from tests.support.jobs import WorkerDied

BAD_SPECS = [
    ({"trials": 3, "pass_k": 5}, "pass_k", "Pass^k with k=5 needs at least 5 trials; the run has 3"),
    # Trials at fault: Pass^k is measured against what was typed, never against the default 10.
    ({"trials": 0, "pass_k": 3}, "pass_k", "Pass^k with k=3 needs at least 3 trials; the run has 0"),
    ({"concurrency": 0}, "concurrency", "must be at least 1, got 0"),
    ({"concurrency": 500}, "concurrency", "must be at most 32, got 500"),
    ({"trials": 0}, "trials", "must be at least 1, got 0"),
    ({"task_ids": ["shop-app-001", "nope-1"]}, "task_ids", "not in the selection of task set 'shop-130': nope-1"),
    ({"task_ids": ["shop-app-001"], "domain": "clothing"}, "task_ids", "shop-app-001"),
    ({"task_set": "empty", "task_ids": []}, "task_ids", "the task selection is empty (task set 'empty', domain any, split any)"),
    ({"task_set": "missing"}, "task_set", "no task set 'missing'"),
    ({"bank_source": "no-such-bank"}, "bank_source", "no memory bank 'no-such-bank'"),
    ({"memory_mode": "none", "bank_source": "seed-bank"}, "bank_source", "only used when the run has memory"),
    ({"memory_mode": "memorb", "dmrm": {"alpha": 0.2}}, "dmrm", "only used when memory_mode is dmrm or both"),
    ({"memory_mode": "dmrm", "dmrm": {"alpha": 1.5}}, "dmrm.alpha", "must be at most 1.0, got 1.5"),
    ({"memory_mode": "dmrm", "dmrm": {"c_max": 8}}, "dmrm.c_max", "must be at least 16, got 8"),
    ({"domain": "food"}, "domain", "must be one of the task set's domains (appliances, clothing), got 'food'"),
    ({"agent": {"backend": "llm"}}, "agent.backend", "the actor role has no LLM endpoint configured"),
]


@pytest.mark.parametrize(("overrides", "field", "message"), BAD_SPECS, ids=[case[1] for case in BAD_SPECS])
def test_a_bad_launch_names_the_field_and_writes_nothing(builtin, overrides, field, message):
    TaskSet.objects.create(name="empty")
    bank_get_or_create(name="seed-bank")
    banks = MemoryBank.objects.count()
    with pytest.raises(RunLaunchError) as caught:
        run_launch(spec=spec(**overrides))
    assert any(f == field and message in m for f, m in caught.value.problems), caught.value.problems
    assert not EvaluationRun.objects.exists() and not Trial.objects.exists()
    assert MemoryBank.objects.count() == banks


def test_a_bad_launch_names_every_problem_at_once(builtin):
    """The spec's own problems and the database checks of the other fields come in one answer."""
    with pytest.raises(RunLaunchError) as caught:
        run_launch(spec=spec(name="", trials=0, task_ids=["nope-1"], bank_source="no-such-bank"))
    assert {field for field, _ in caught.value.problems} == {"name", "trials", "task_ids", "bank_source"}
    assert not EvaluationRun.objects.exists()


def test_a_launch_writes_the_run_its_bank_and_trials(builtin, operator_user):
    run = run_launch(spec=spec(trials=4, pass_k=4), user=operator_user)
    assert run.status == EvaluationRun.Status.QUEUED and run.created_by == operator_user
    assert run.episodes_total == 12 and len(run.task_pks) == 3 and run.scripted and run.agent_backend == "scripted"
    assert list(run.trial_rows.values_list("number", "status")) == [(n, "pending") for n in range(1, 5)]
    assert not RunEpisode.objects.exists()  # a trial's rows are made when it starts
    assert run.bank.name == f"run #{run.pk} · small run" and not run.bank.orbs.exists()


def test_the_selection_filters_by_domain_and_split(builtin):
    run = run_launch(spec=spec(task_ids=[], domain="appliances", split="test", memory_mode="none"))
    assert len(run.task_pks) == 29 and run.bank is None


def test_a_copied_bank_is_the_runs_own(builtin):
    source = bank_get_or_create(name="team memory", auto_approve="always")
    episode = episode_run(task=builtin.tasks.get(external_id="shop-app-001"), agent_config={"error_rates": {
        "wrong_tool": 1.0}})
    orb_from_episode(bank=source, trajectory=episode_trajectory(episode), source_label="before")
    run = prepared(run_launch(spec=spec(bank_source="team-memory", trials=1)))
    assert run.bank != source and run.bank_copied_from == "team memory"
    assert run.bank.orbs.count() == 1 and run.bank.orbs.get().status == Orb.Status.APPROVED
    run = run_drive(run=run)
    hits = [hit for row in run.run_episodes.select_related("episode") for m in row.episode.memories for hit in m["hits"]]
    assert hits, "trial 1 starts from the copied memory"
    assert run.bank.orbs.count() > 1 and source.orbs.count() == 1  # the source is never changed


@pytest.fixture
def team_memory(builtin):
    source = bank_get_or_create(name="team memory", auto_approve="always")
    for seed in (1, 2):
        episode = episode_run(task=builtin.tasks.get(external_id="shop-app-001"), seed=seed,
                              agent_config={"error_rates": {"wrong_tool": 1.0}})
        orb_from_episode(bank=source, trajectory=episode_trajectory(episode), source_label=f"before {seed}")
    return source


def _launched(agent, capture, **overrides):
    """POST a launch; the job it queues is held (not run) and handed back with the answer."""
    with capture() as queued:
        answer = agent.post("/api/evaluation/runs/", json.dumps(spec(**overrides)), content_type="application/json")
    return answer, queued


def test_it_answers_202_and_copies_the_bank_in_a_job_that_then_queues_the_run(
        agent, operator_user, client, team_memory, django_capture_on_commit_callbacks):
    answer, queued = _launched(agent, django_capture_on_commit_callbacks, bank_source="team-memory", trials=1)

    assert answer.status_code == 202, answer.content
    body = answer.json()
    job = Job.objects.get(kind="evaluation.run_prepare")
    assert answer["Location"] == body["preparation_url"] == f"http://testserver/api/jobs/{job.pk}"
    assert (body["status"], body["bank"], body["pins"]["tasks"]) == ("preparing", None, [])  # pinned once copied
    assert not MemoryBank.objects.filter(name__startswith=f"run #{body['id']} ").exists()  # nothing copied yet
    client.force_login(operator_user)
    page = client.get(reverse("evaluation:run_detail", args=[body["id"]])).content.decode()
    assert "copying its memory bank" in page and f"job #{job.pk}" in page
    queued[0]()  # the worker takes the job

    job.refresh_from_db()
    run = EvaluationRun.objects.get(pk=body["id"])
    assert (job.status, job.result["run"], run.status) == ("succeeded", run.pk, EvaluationRun.Status.QUEUED)
    assert job.total == job.done + 1 > 2  # every line of the bank's file checked, then one write
    assert run.bank.orbs.count() == 2 and run.pins["memory"]["orbs"] == 2 and run.task_pins.count() == 3
    assert run_drive(run=run).status == EvaluationRun.Status.COMPLETED


def test_it_takes_the_copy_an_interrupted_job_made_and_copies_nothing_twice(
        agent, team_memory, monkeypatch, django_capture_on_commit_callbacks):
    answer, _ = _launched(agent, django_capture_on_commit_callbacks, bank_source="team-memory", trials=1)
    run = EvaluationRun.objects.get(pk=answer.json()["id"])
    job = run_preparation_job(run=run)

    def dies(*, run):
        raise WorkerDied
    monkeypatch.setattr(launch_module, "run_pins_record", dies)
    with pytest.raises(WorkerDied):
        job_execute(job_id=job.pk)
    copies = MemoryBank.objects.filter(name__startswith=f"run #{run.pk} ")
    assert copies.count() == 1 and EvaluationRun.objects.get(pk=run.pk).bank is None
    monkeypatch.undo()

    job_execute(job_id=job.pk)  # the message re-delivered to another worker

    run.refresh_from_db()
    assert (run.status, run.bank) == (EvaluationRun.Status.QUEUED, copies.get())
    assert run.bank.orbs.count() == 2 and MemoryBank.objects.count() == 2
    job_execute(job_id=job.pk)  # and once more, finished: nothing
    assert MemoryBank.objects.count() == 2


def test_a_bank_copy_that_breaks_fails_its_run_instead_of_leaving_it_preparing(
        agent, team_memory, monkeypatch, django_capture_on_commit_callbacks):
    answer, _ = _launched(agent, django_capture_on_commit_callbacks, bank_source="team-memory", trials=1)
    run = EvaluationRun.objects.get(pk=answer.json()["id"])

    def breaks(**kwargs):
        raise RuntimeError("no space left on device")
    monkeypatch.setattr(launch_module, "run_bank_copy", breaks)
    job_execute(job_id=run_preparation_job(run=run).pk)

    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.FAILED
    assert "no space left on device" in run.status_message and run_preparation_job(run=run).status == "failed"


def test_it_resumes_a_run_cancelled_while_copying_its_bank_only_once_the_copy_is_done(
        agent, team_memory, django_capture_on_commit_callbacks):
    answer, _ = _launched(agent, django_capture_on_commit_callbacks, bank_source="team-memory", trials=1)
    run = EvaluationRun.objects.get(pk=answer.json()["id"])
    run_cancel(run=run)

    with pytest.raises(RunActionError, match="still copying its memory bank"):
        run_resume(run=EvaluationRun.objects.get(pk=run.pk))
    job_execute(job_id=run_preparation_job(run=run).pk)  # the copy ends; a cancelled run is not started
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.CANCELLED and run.bank is not None

    run_resume(run=run)
    assert run_drive(run=EvaluationRun.objects.get(pk=run.pk)).status == EvaluationRun.Status.COMPLETED


def test_it_refuses_an_unknown_bank_before_any_job(agent, builtin, django_capture_on_commit_callbacks):
    answer, queued = _launched(agent, django_capture_on_commit_callbacks, bank_source="no-such-bank")
    assert answer.status_code == 422 and "no memory bank 'no-such-bank'" in answer.content.decode()
    assert not Job.objects.exists() and not EvaluationRun.objects.exists() and not queued
