"""What a benchmark asks of a model goes to memweb's LLM roles when one is configured, and is never
made up offline: τ²-bench's natural-language assertions (the scorer role; offline "not judged",
never passed) and ECom-Bench's image tool (the actor role; offline "unavailable")."""
import pytest

from evaluation.environments.ecom_bench import tools as ecom_tools
from evaluation.environments.tau2_retail import reward

pytestmark = pytest.mark.django_db


@pytest.fixture
def asserted(tau2_tasks):
    """A τ²-bench task with natural-language assertions, and its gold solution."""
    task = next(spec for spec in tau2_tasks.values() if len(spec["nl_assertions"]) >= 2)
    return task, reward.gold_replay(task).state, reward.gold_replies(task)


def test_offline_the_assertions_are_counted_as_not_judged(asserted):
    task, state, replies = asserted
    result = reward.score(task, state, replies, judged=True)
    assert result.success and "nl_assertions" not in result.breakdown
    assert result.breakdown["nl_assertions_not_judged"] == len(task["nl_assertions"])


def test_the_scorer_role_judges_them_and_a_failed_one_fails_the_episode(asserted, fake_llm):
    task, state, replies = asserted
    fake_llm.use_for("scorer")
    fake_llm.reply_json({"met": [True] * len(task["nl_assertions"])})
    passed = reward.score(task, state, replies, judged=True)
    assert passed.success and passed.breakdown["nl_assertions"] == 1.0
    assert passed.breakdown["nl_assertions_not_judged"] == 0
    asked = fake_llm.chat_requests[-1]["messages"][-1]["content"]
    assert all(text in asked for text in task["nl_assertions"])

    fake_llm.reply_json({"met": [True] + [False] * (len(task["nl_assertions"]) - 1)})
    failed = reward.score(task, state, replies, judged=True)
    assert not failed.success and failed.breakdown["nl_assertions"] == 0.0 and failed.reward == 0.0


def test_a_judge_answering_the_wrong_number_of_verdicts_judges_nothing(asserted, fake_llm):
    task, state, replies = asserted
    fake_llm.use_for("scorer")
    fake_llm.reply_json({"met": [True]})
    result = reward.score(task, state, replies, judged=True)
    assert "nl_assertions" not in result.breakdown
    assert result.breakdown["nl_assertions_not_judged"] == len(task["nl_assertions"])


def test_replays_never_ask_the_judge(asserted, fake_llm):
    task, state, replies = asserted
    fake_llm.use_for("scorer")
    assert "nl_assertions" not in reward.score(task, state, replies).breakdown  # validator, env_replay
    assert fake_llm.chat_requests == []


def test_the_image_tool_asks_the_actor_role_or_says_it_cannot(fake_llm):
    question = {"summarized_query": "the customer sent a photo of the fridge door",
                "needed_query": "is the seal damaged?", "history_messages": "user: [image] the door leaks"}
    assert ecom_tools.get_image_info({}, **question) == ecom_tools.OFFLINE_IMAGE_ANSWER
    fake_llm.use_for("actor")
    fake_llm.reply_text("The door seal is torn at the lower left corner.")
    assert ecom_tools.get_image_info({}, **question) == "The door seal is torn at the lower left corner."
    assert "is the seal damaged?" in fake_llm.chat_requests[-1]["messages"][-1]["content"]
