"""One episode per LLM role against a real llama-cpp-python server serving Gemma 3 270M.

Opt-in (`make llm-smoke`). A base model this small answers poorly, so only structure is
asserted: every call logged with tokens and latency, results from the LLM or labelled as the
scripted fallback, nothing raised. What happened is written to .data/llm-smoke/summary.json.
"""
import dataclasses
import json
import time

import pytest

from evaluation.feedback.services import feedback_for_episode
from evaluation.models import Episode, Task
from evaluation.services import episode_run, episode_trajectory, taskset_builtin_load
from memweb.llm import role_statuses
from memweb.llm.backends import TextBackend
from memweb.llm.config import JsonMode
from memweb.models import LLMCall
from orbs.backends.emotion import emotion_tag
from orbs.backends.reflector import reflection_write
from orbs.backends.rewriter import query_rewrite
from orbs.schemas import TrajectoryIn
from tests.llm_smoke.conftest import SMOKE_DIR

pytestmark = [pytest.mark.llm_server, pytest.mark.django_db]

MAX_TURNS = 3


@pytest.fixture
def online(settings, llama_server):
    """Point one role at the server; every other role stays on its offline backend."""
    base_url, model = llama_server

    def point(role: str):
        offline = {name: dataclasses.replace(config, base_url="") for name, config in settings.LLM_ROLES.items()}
        offline[role] = dataclasses.replace(settings.LLM_ROLES[role], base_url=base_url, model=model,
                                            api_key="not-needed", timeout=180.0, max_retries=1)
        settings.LLM_ROLES = offline
        return offline[role]
    return point


@pytest.fixture
def task(db) -> Task:
    taskset_builtin_load()
    return Task.objects.get(external_id="shop-app-001")


def assert_calls_logged(role: str) -> list[LLMCall]:
    calls = list(LLMCall.objects.filter(role=role))
    assert calls, f"no call logged for {role}"
    for call in calls:
        assert call.latency_ms > 0 and call.attempts >= 1
        if call.status == LLMCall.Status.ERROR:
            assert call.error, "a failed call says why"
        else:
            assert call.tokens_in > 0, "prompt tokens are logged (reported or estimated)"
    return calls


def record(role: str, **facts) -> None:
    calls = LLMCall.objects.filter(role=role)
    status = next(row for row in role_statuses() if row["role"] == role)
    summary = {"calls": calls.count(), "by_status": {s: calls.filter(status=s).count() for s in LLMCall.Status.values},
               "tokens_in": sum(c.tokens_in for c in calls), "tokens_out": sum(c.tokens_out for c in calls),
               "latency_ms": [c.latency_ms for c in calls], "capabilities": status["capabilities"],
               "errors": [c.error[:300] for c in calls if c.error], **facts}
    path = SMOKE_DIR / "summary.json"
    existing = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**existing, role: summary}, indent=2, default=str))


def assert_episode_labelled(episode: Episode) -> None:
    assert episode.status in Episode.Status.values and episode.ended_by in Episode.EndedBy.values
    assert episode.ended_by != Episode.EndedBy.ERROR or episode.infra_error


def test_the_actor_plays_an_episode(online, task):
    config = online("actor")
    started = time.monotonic()
    episode = episode_run(task=task, agent_config={"backend": "llm", "max_steps": 2}, max_turns=MAX_TURNS)
    assert_episode_labelled(episode)
    assert episode.agent_backend == f"llm:{config.model}" and episode.customer_backend == "agenda"
    assert_calls_logged("actor")
    record("actor", seconds=round(time.monotonic() - started, 1), tool_calls=episode.tool_calls,
           ended_by=episode.ended_by, infra_error=episode.infra_error[:300])


def test_the_user_simulator_plays_an_episode(online, task):
    config = online("user_simulator")
    started = time.monotonic()
    episode = episode_run(task=task, customer_config={"backend": "llm"}, max_turns=MAX_TURNS)
    assert_episode_labelled(episode)
    assert episode.customer_backend == f"llm:{config.model}"
    assert_calls_logged("user_simulator")
    record("user_simulator", seconds=round(time.monotonic() - started, 1), ended_by=episode.ended_by)


def assert_backend_labelled(result, model: str) -> None:
    assert result.backend in (f"llm:{model}", TextBackend.FALLBACK)
    assert result.value.strip()
    assert result.backend != TextBackend.FALLBACK or result.error


def assert_json_mode_recorded(role: str) -> None:
    status = next(row for row in role_statuses() if row["role"] == role)
    assert status["capabilities"].get("json_mode") in JsonMode.values


def test_the_rewriter_rewrites_a_query(online):
    config = online("rewriter")
    started = time.monotonic()
    result = query_rewrite(query="where is my dryer?", context={"history": ["I ordered a tumble dryer last week."]})
    assert_backend_labelled(result, config.model)
    assert_calls_logged("rewriter")
    assert_json_mode_recorded("rewriter")
    record("rewriter", seconds=round(time.monotonic() - started, 1), backend=result.backend)


def test_the_reflector_reflects_on_an_episode_and_tags_its_emotion(online, task):
    config = online("reflector")
    started = time.monotonic()
    episode = episode_run(task=task, max_turns=MAX_TURNS)
    trajectory = TrajectoryIn(**episode_trajectory(episode))
    results = [reflection_write(trajectory=trajectory), emotion_tag(text=trajectory.user_utterances[-1])]
    for result in results:
        assert_backend_labelled(result, config.model)
    assert_calls_logged("reflector")
    assert_json_mode_recorded("reflector")
    record("reflector", seconds=round(time.monotonic() - started, 1), backends=[r.backend for r in results])


def test_the_scorer_scores_an_episode(online, task):
    config = online("scorer")
    started = time.monotonic()
    feedback = feedback_for_episode(episode=episode_run(task=task, max_turns=MAX_TURNS), seed=0)
    assert feedback.score_backend in (f"llm:{config.model}", TextBackend.FALLBACK)
    assert feedback.score_backend != TextBackend.FALLBACK or feedback.errors
    assert_calls_logged("scorer")
    assert_json_mode_recorded("scorer")
    record("scorer", seconds=round(time.monotonic() - started, 1), backend=feedback.score_backend)
