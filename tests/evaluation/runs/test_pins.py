"""What a feedback run pins of its simulated user: the critic's, scorer's and reviser's backend, model
and prompt-template hash, as the agent's are pinned; an export carries them to an import."""
import dataclasses
import json

import pytest

from evaluation.feedback import prompts
from evaluation.feedback.prompts import feedback_prompt_hash
from evaluation.runs.services import run_drive, run_export_json, run_import


@pytest.fixture
def scorer_llm(settings):
    """The scorer role configured with an endpoint at launch (pinning reads the configuration); calling
    `offline()` takes it back before anything would call it."""
    offline = settings.LLM_ROLES
    settings.LLM_ROLES = {**offline, "scorer": dataclasses.replace(offline["scorer"], base_url="http://127.0.0.1:9/v1",
                                                                   model="judge-1")}
    return lambda: setattr(settings, "LLM_ROLES", offline)


def test_it_pins_the_feedback_scorers_prompt_templates_with_the_run(launch, scorer_llm):
    run = launch(feedback_enabled=True, memory_mode="none", trials=1)

    assert run.pins["feedback"]["scorer"] == {"backend": "llm", "model": "judge-1",
                                              "prompt_hash": feedback_prompt_hash(part="scorer")}
    assert run.pins["feedback"]["critique"] == {"backend": "scripted", "model": None, "prompt_hash": None}
    assert len(feedback_prompt_hash(part="scorer")) == 64
    assert launch(memory_mode="none", trials=1).pins["feedback"] is None  # no feedback, nothing to pin


def test_it_changes_the_pin_when_the_scorers_template_changes(monkeypatch):
    before = {part: feedback_prompt_hash(part=part) for part in prompts.FEEDBACK_PARTS}
    monkeypatch.setattr(prompts, "SCORER_SYSTEM", prompts.SCORER_SYSTEM + " Be strict.")

    after = {part: feedback_prompt_hash(part=part) for part in prompts.FEEDBACK_PARTS}

    assert after["scorer"] != before["scorer"] and after["critique"] == before["critique"]


def test_it_shows_the_feedback_pins_and_an_import_carries_them(launch, scorer_llm, operator_user, client):
    run = launch(feedback_enabled=True, memory_mode="none", trials=1)
    scorer_llm()  # played with the offline scorer: the pins say what the launch was configured with
    run = run_drive(run=run)
    copy = run_import(data=json.loads(json.dumps(run_export_json(run=run))), user=operator_user)

    assert copy.pins["feedback"] == run.pins["feedback"]
    client.force_login(operator_user)
    page = client.get(copy.get_absolute_url()).content.decode()
    assert "Feedback scorer" in page and feedback_prompt_hash(part="scorer")[:12] in page
