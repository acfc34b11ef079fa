"""No answer key in memory (issue 28): reflections, DMRM experiences and feedback-into-memory Orbs
hold no identifier or value that only the task's gold answer knew; the oracle variant does."""
import json

from django.urls import reverse

from evaluation.feedback.models import FeedbackProfile
from evaluation.feedback.services import critique, episode_judged, evaluation_context
from evaluation.feedback.services.conversation import critique_context
from evaluation.runs.models import EvaluationRun
from evaluation.runs.services import run_drive, run_export_json, run_import, run_launch
from evaluation.services import episode_run, episode_trajectory
from evaluation.services.gold_leaks import bank_gold_leaks, episode_gold_only_values, episode_shown_text
from evaluation.shop.reward import mentions

RATES = {"wrong_tool": 0.3, "wrong_arguments": 0.3, "result_unused": 0.3}
HIGH_RATES = {"wrong_tool": 0.6, "wrong_arguments": 0.6, "result_unused": 0.6}
TASK_IDS = ["shop-app-001", "shop-app-023", "shop-clo-008"]


def _played(user, **spec):
    run = run_launch(spec={"name": "leak check", "agent": {"error_rates": RATES}, "per_turn": False, **spec},
                     user=user, executor=EvaluationRun.Executor.INLINE)
    return run_drive(run=run)


def test_a_scripted_run_of_every_builtin_task_leaks_no_gold_into_memory(builtin, operator_user):
    # One trial writes a memory from every task; later trials replay the same tasks (what would carry a
    # leaked answer to the agent), so the check is over what that trial stored.
    run = _played(operator_user, trials=1, memory_mode="memorb", feedback_enabled=True, feedback_memory="onpolicy")
    assert run.status == "completed" and run.episodes_finished == builtin.tasks.count()
    assert run.run_spec.reflection_input == "trajectory"
    assert not run.run_episodes.filter(orb__isnull=True).exists()  # every episode reflected, feedback folded in
    assert bank_gold_leaks(bank=run.bank) == []


def _failed_episodes(builtin):
    """Episodes of tasks the scripted agent gets wrong on every planned kind: their gold values stay unsaid."""
    rates = {"wrong_tool": 1.0, "wrong_arguments": 1.0, "result_unused": 1.0}
    tasks = builtin.tasks.filter(external_id__in=["shop-app-001", "shop-app-023", "shop-clo-008", "shop-clo-020"])
    return [episode_run(task=task, agent_config={"error_rates": rates}) for task in tasks.order_by("external_id")]


def _holds(text: str, values) -> list[str]:
    return [value for value in values if mentions(value, text)]


def test_the_trajectory_memory_learns_from_holds_no_gold_only_value_and_the_oracle_one_does(builtin):
    episodes = _failed_episodes(builtin)
    gold_only = {e.pk: episode_gold_only_values(e) for e in episodes}
    assert any(gold_only.values()), "the scripted agent's mistakes leave some gold value unsaid"
    for episode in episodes:
        plain = json.dumps(episode_trajectory(episode))
        assert _holds(plain, gold_only[episode.pk]) == [], episode.task_snapshot["id"]
        assert "where the request needed" not in plain and ") was never told" not in plain
    oracle = [_holds(json.dumps(episode_trajectory(e, reflection_input="oracle")), gold_only[e.pk]) for e in episodes]
    assert any(oracle)


def test_the_diagnosis_from_the_trajectory_names_the_failed_components_kinds(builtin):
    episode = _failed_episodes(builtin)[0]
    errors = episode_trajectory(episode)["errors"]
    kinds = {e["kind"] for e in errors}
    failed = {name for name in ("lookups", "state", "outputs") if episode.reward_breakdown.get(name) == 0}
    assert failed and kinds  # the agent's errors still reach memory, as kinds with generic advice
    if "outputs" in failed:
        assert "result_unused" in kinds
    assert all("component unmet" in e["detail"] or "does not exist" in e["detail"] for e in errors)


def test_the_critique_that_goes_into_memory_is_written_without_the_gold_answer(builtin, monkeypatch):
    episode = _failed_episodes(builtin)[1]
    spec = episode.task_snapshot
    context = critique_context(spec)
    gold = [str(v) for call in spec["gold_actions"] + spec["gold_lookups"] for v in call["arguments"].values()]
    assert "expected_changes" not in context and "expected_changes" in evaluation_context(spec)
    assert [o["value"] for o in spec["required_outputs"]] == [] or not any(
        o["value"] in json.dumps(context) for o in spec["required_outputs"])
    prompts = []

    def answer(*, role, messages, schema):
        prompts.append(messages[-1]["content"])
        return schema(reasoning="not done", behavior="end_conversation", response=None)

    monkeypatch.setattr(critique, "llm_json", answer)
    critique.critique_llm(episode=episode, judged=episode_judged(episode), profile=FeedbackProfile(name="p"))
    said_by_episode = episode_shown_text(episode)
    assert not [v for v in gold if v and not mentions(v, said_by_episode) and v in prompts[0]]


def test_an_oracle_run_is_flagged_by_the_check_and_named_on_its_pages(builtin, operator_user, agent):
    client = agent
    oracle = _played(operator_user, trials=2, memory_mode="memorb", reflection_input="oracle",
                     task_ids=TASK_IDS, agent={"error_rates": HIGH_RATES})
    plain = _played(operator_user, trials=2, memory_mode="memorb", task_ids=TASK_IDS, agent={"error_rates": HIGH_RATES})
    assert oracle.run_spec.reflection_input == "oracle" and plain.run_spec.reflection_input == "trajectory"
    leaks = bank_gold_leaks(bank=oracle.bank)
    assert leaks and {leak.memory for leak in leaks} == {"orb"}
    assert bank_gold_leaks(bank=plain.bank) == []
    client.force_login(operator_user)
    assert "oracle reflection" in client.get(oracle.get_absolute_url()).content.decode()
    assert "oracle reflection" not in client.get(plain.get_absolute_url()).content.decode()
    compare = client.get(reverse("evaluation:run_compare") + f"?runs={plain.pk}&runs={oracle.pk}").content.decode()
    assert f"Run #{oracle.pk} {oracle.name} uses oracle reflection" in compare
    assert agent.get(f"/api/evaluation/runs/{oracle.pk}").json()["reflection_input"] == "oracle"
    exported = json.loads(json.dumps(run_export_json(run=oracle)))
    assert exported["run"]["reflection_input"] == "oracle"
    assert run_import(data=exported, user=operator_user).run_spec.reflection_input == "oracle"
    del exported["run"]["reflection_input"]  # a file exported before the choice existed
    assert run_import(data=exported, user=operator_user).run_spec.reflection_input == "oracle"
    exported = json.loads(json.dumps(run_export_json(run=plain)))
    assert run_import(data=exported, user=operator_user).run_spec.reflection_input == "trajectory"
