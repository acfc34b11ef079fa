"""The external memory layer against a real service (the example BM25 service, its own process):
the run learns through the service and retrieves what it learnt, keeps the key out of everything it
shows back (the API's answers, the export), and lives through timeouts, 5xx answers and bodies that are not the contract's."""
import json

import pytest

from evaluation.memory_layers import external
from evaluation.memory_layers.models import ExternalLearning
from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import RunLaunchError, run_drive, run_export_json, run_launch
from tests.evaluation.runs.conftest import TASK_IDS, spec
from tests.support.memory_service import KEY, bm25_service


def _external(url: str, **overrides) -> dict:
    return spec(name="external bm25", memory_mode="external", external_url=url, external_key=KEY, **overrides)


def test_a_run_learns_through_the_service_and_never_shows_its_key(builtin, agent):
    with bm25_service() as url:
        launched = agent.post("/api/evaluation/runs/", json.dumps(_external(url, trials=2, task_ids=TASK_IDS[:2])),
                              content_type="application/json")
        assert launched.status_code == 201 and KEY not in launched.content.decode(), launched.content
        run = run_drive(run=EvaluationRun.objects.get(pk=launched.json()["id"]))
        assert run.status == "completed", run.status_message
        shown = agent.get(f"/api/evaluation/runs/{run.pk}")
        assert shown.status_code == 200 and KEY not in shown.content.decode()
        assert shown.json()["spec"]["external_url"] == url
        records = {(row.trial.number, row.task_key): row.episode.memories[0]["external"]
                   for row in run.run_episodes.select_related("trial", "episode")}
        assert {record["retrieved"] for (trial, _), record in records.items() if trial == 1} == {0}
        second = records[(2, TASK_IDS[0])]
        assert second["retrieved"] == 2 and second["items"][0]["id"].startswith("evaluation-episode:")
        assert second["prompt_block"].startswith("Past episodes like this one") and second["attempts"] == 1
        assert ExternalLearning.objects.filter(run_episode__run=run, learned=1, error="").count() == 4
        snapshots = run.external_memory.snapshots
        assert [(s["trial"], s["items"]) for s in snapshots] == [(1, 2), (2, 4)]
        exported = run_export_json(run=run)
        assert exported["run"]["memory_layer"]["service"] == "bm25-example"
        assert KEY not in json.dumps(exported, default=str) and "external_key" not in exported["run"]["spec"]
        assert KEY not in json.dumps(EvaluationRun.objects.filter(pk=run.pk).values("spec").get()["spec"])


def test_failed_calls_are_retried_then_recorded_and_the_run_completes(builtin, operator_user, monkeypatch):
    monkeypatch.setattr(external, "TIMEOUT_SECONDS", 0.3)
    monkeypatch.setattr(external, "BACKOFF_SECONDS", 0.01)
    # Trial 1's retrieve meets a 500, a body that is not JSON, then a timeout: it fails for good. Trial
    # 2's meets two more timeouts and is answered at its third attempt. Trial 1's learn meets 500s only.
    faults = "retrieve:500:1,retrieve:badjson:1,retrieve:slow:3,learn:500:3"
    with bm25_service(faults=faults, slow_seconds=1.0) as url:
        run = run_drive(run=run_launch(spec=_external(url, trials=2, task_ids=TASK_IDS[:1], concurrency=1),
                                       user=operator_user))
    assert run.status == "completed" and run.episodes_error == 0, run.status_message
    first, second = (run.run_episodes.get(trial__number=n) for n in (1, 2))
    failed = first.episode.memories[0]["external"]
    assert failed["attempts"] == 3 and "no answer within 0.3 s" in failed["error"] and "prompt_block" not in failed
    recovered = second.episode.memories[0]["external"]
    assert recovered["attempts"] == 3 and "error" not in recovered and recovered["retrieved"] == 0
    assert first.external_learning.attempts == 3 and "answered 500" in first.external_learning.error
    assert second.external_learning.learned == 1 and second.external_learning.error == ""
    assert [s["items"] for s in run.external_memory.snapshots] == [0, 1]


def test_a_service_that_does_not_answer_is_refused_at_launch(builtin, operator_user):
    with bm25_service() as url:
        pass  # stopped: its port answers nothing now
    with pytest.raises(RunLaunchError) as refused:
        run_launch(spec=_external(url), user=operator_user)
    assert refused.value.problems[0][0] == "external_url" and "does not answer describe" in str(refused.value)
    with pytest.raises(RunLaunchError, match="external_url: a service URL and key are only used when memory_mode is "
                                             "external, not memorb"):
        run_launch(spec=spec(external_url=url), user=operator_user)
    assert not EvaluationRun.objects.exists()
