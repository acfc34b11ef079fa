"""ECom-Bench episodes end to end with the offline players (the labelled gold-replay agent and the
customer stating the task's facts), re-grading, and the protocol members the pages and runs read."""
import copy
import re

from evaluation.environments import STOP, Environment
from evaluation.environments.benchmark import BenchmarkEnvironment
from evaluation.environments.ecom_bench import ECOM
from evaluation.environments.ecom_bench.players import ADVICE, GOLD_REPLAY_LABEL, GoldReplayAgent
from evaluation.environments.ecom_bench.tools import OFFLINE_IMAGE_ANSWER
from tests.evaluation.benchmarks.ecom_support import ecom_tasks, ecom_world  # noqa: F401

ALL_ERRORS = {"wrong_tool": 1.0, "wrong_arguments": 1.0, "result_unused": 1.0}


def by_id(tasks: list[dict], task_id: str) -> dict:
    return next(task for task in tasks if task["id"] == task_id)


def play(task: dict, *, rates: dict | None = None, memory=None, agent=None, seed: int = 0):
    agent = agent or ECOM.scripted_agent(seed=seed, key=task["id"], error_rates=rates)
    return ECOM.play(task=task, agent=agent, customer=ECOM.scripted_customer(task=task, seed=seed), memory=memory)


class Advice:
    """A memory hook that retrieves the diagnosis' advice for every error kind."""

    def before_turn(self, *, turn, query, calls, dialogue):
        return " ".join(ADVICE.values()), {"turn": turn}


def test_it_is_a_benchmark_environment():
    assert isinstance(ECOM, Environment) and isinstance(ECOM, BenchmarkEnvironment)
    assert ECOM.name == ECOM.benchmark == "ecom-bench" and ECOM.builtin_tasks() == []
    assert ECOM.reward_components == ("actions", "searches", "outputs")
    assert re.fullmatch(r"[0-9a-f]{64}", ECOM.reward_source_hash())
    assert set(ECOM.content_labels) == {"instruction", "world", "gold_actions", "gold_lookups", "required_outputs"}


def test_one_episode_with_the_scripted_players_earns_the_reward(ecom_tasks):
    task = by_id(ecom_tasks, "0")
    outcome = play(task)
    assert outcome.reward.success and outcome.reward.breakdown["actions"] == 1.0
    assert outcome.ended_by == "stop" and outcome.committed == [] and outcome.errors == []
    assert outcome.messages[0]["role"] == "user" and "313021098954" in " ".join(
        m["content"] for m in outcome.messages if m["role"] == "user")
    assert STOP in outcome.messages[-1]["content"]
    made = [call["name"] for call in outcome.calls]
    assert "manage_urgent_tool" in made and all(call["ok"] for call in outcome.calls)
    assert outcome.turns == len(task["intents"])  # one answered turn per intent


def test_every_task_plays_to_reward_1_without_errors_and_to_0_with_all_of_them(ecom_tasks):
    for task in ecom_tasks:
        assert play(task).reward.reward == 1.0, task["id"]
        erring = play(task, rates=ALL_ERRORS)
        assert erring.reward.reward == 0.0 and erring.committed, task["id"]
        assert {error["kind"] for error in erring.errors} == set(erring.committed), task["id"]


def test_the_errors_it_makes_are_diagnosed_without_the_answer_key(ecom_tasks):
    task = by_id(ecom_tasks, "0")
    outcome = play(task, rates=ALL_ERRORS)
    assert outcome.committed == ["wrong_arguments", "wrong_tool"]  # task 0 asks for no text
    assert {error["kind"] for error in outcome.errors} == {"wrong_arguments", "wrong_tool"}
    diagnosis = " ".join(error["detail"] for error in outcome.errors)
    gold_values = {str(v) for call in task["gold_lookups"] + task["gold_actions"] for v in call["arguments"].values()}
    assert not [value for value in gold_values if value in diagnosis]


def test_a_memory_carrying_the_advice_stops_the_errors(ecom_tasks):
    task = by_id(ecom_tasks, next(t["id"] for t in ecom_tasks if t["required_outputs"] and t["gold_actions"]))
    assert play(task, rates=ALL_ERRORS).reward.reward == 0.0
    remembered = play(task, rates=ALL_ERRORS, memory=Advice())
    assert remembered.reward.reward == 1.0 and remembered.committed == [] and remembered.memories


def test_the_agent_says_it_reads_the_answer_key():
    agent = ECOM.scripted_agent(seed=0, key="0")
    assert agent.label == GOLD_REPLAY_LABEL and "uses the gold answer" in agent.label and agent.label.startswith("scripted")
    assert ECOM.scripted_customer(task={"id": "0", "intents": []}, seed=0).label.startswith("agenda")


def test_rescoring_replays_the_transcript_against_a_newer_version(ecom_tasks):
    task = by_id(ecom_tasks, "0")
    outcome = play(task)
    assert ECOM.rescore(task=task, transcript=outcome.messages, played=task).reward == 1.0
    newer = copy.deepcopy(task)
    newer["gold_actions"] = newer["gold_actions"][:-1]  # no cashback asked for any more
    assert ECOM.content_changes(task, newer) == ["gold_actions"]
    assert ECOM.content_hash(task) != ECOM.content_hash(newer)
    rescored = ECOM.rescore(task=newer, transcript=outcome.messages, played=task)
    assert rescored.reward == 0.0 and rescored.breakdown["actions"] == 0.0


def test_the_offline_image_tool_answers_and_the_task_still_scores(ecom_tasks):
    task = by_id(ecom_tasks, "0")

    class LooksAtTheScreenshot(GoldReplayAgent):
        def respond(self, *, text, memory, env, recall=None):
            if "图片" in text:
                self.seen = env.use("get_image_info_tool", summarized_query="验证晒单截图", needed_query="是否含评论",
                                    history_messages=text)
            return super().respond(text=text, memory=memory, env=env)

    agent = LooksAtTheScreenshot(seed=0, key="0")
    outcome = play(task, agent=agent)
    assert agent.seen.ok and agent.seen.content == OFFLINE_IMAGE_ANSWER
    assert outcome.reward.reward == 1.0


def test_a_transfer_to_a_specialist_ends_the_episode(ecom_tasks):
    task = by_id(ecom_tasks, "0")

    class Transfers:
        label, tokens_in, tokens_out = "test-transfer", 0, 0

        def respond(self, *, text, memory, env, recall=None):
            env.use("transfer_to_specialist_tool", platform="jd", shop_id=task["shop_id"], user_id=task["user_id"])
            return "已为您转接专线客服。"

    outcome = play(task, agent=Transfers())
    assert outcome.ended_by == "transfer" and outcome.reward.reward == 0.0


def test_the_llm_players_get_the_wiki_and_the_tools(ecom_tasks):
    task = by_id(ecom_tasks, "0")
    policy = ECOM.agent_policy(task)
    assert "jd" in policy and task["shop_id"] in policy and task["user_id"] in policy and "{shop_id}" not in policy
    assert "{shop_id}" in ECOM.agent_policy()  # no task: the rules with their slots
    assert ECOM.customer_policy(task) == task["customer_rules"] and STOP in ECOM.customer_policy(task)
    assert STOP in ECOM.customer_policy()
    assert len(ECOM.tool_schemas()) == 21


def test_wishes_and_tells(ecom_tasks):
    task = by_id(ecom_tasks, "0")
    assert "我即将旅游" in ECOM.wishes(task, seed=0)
    assert ECOM.tells("50升", "容量是50升的") and not ECOM.tells("50升", "50 升")
