"""The LLM path on ECom-Bench, against the fake OpenAI server: the LLM agent is offered the 21 tools
under their agent names and its scripted tool calls run on the episode's database; the LLM customer
is told the benchmark's customer rules and the task's instruction."""
from evaluation.environments import STOP
from evaluation.environments.ecom_bench import ECOM
from evaluation.llm_backends import LLMAgent, LLMCustomer
from tests.evaluation.benchmarks.ecom_support import ecom_tasks, ecom_world  # noqa: F401


def test_an_llm_episode_with_scripted_tool_calls_earns_the_reward(fake_llm, db, ecom_tasks):
    task = next(t for t in ecom_tasks if t["id"] == "0")
    fake_llm.use_for("actor", "user_simulator")
    fake_llm.reply_text("你好，我买的热水器安装太麻烦了。")  # the customer opens
    calls = [(call["name"] if call["name"].endswith("_tool") else call["name"] + "_tool", call["arguments"])
             for call in task["gold_lookups"] + task["gold_actions"]]
    fake_llm.reply_tool_calls(calls)  # the agent acts
    fake_llm.reply_text("小主，已为您加急、取消订单并登记返现。")  # and answers
    fake_llm.reply_text(STOP)  # the customer is done
    customer = LLMCustomer(task=task, environment=ECOM)
    outcome = ECOM.play(task=task, agent=LLMAgent(environment=ECOM), customer=customer)

    assert outcome.ended_by == "stop" and outcome.reward.reward == 1.0
    assert [call["name"] for call in outcome.calls] == [name for name, _ in calls]
    agent_request = fake_llm.chat_requests[1]
    assert {tool["function"]["name"] for tool in agent_request["tools"]} == {
        schema["function"]["name"] for schema in ECOM.tool_schemas()}
    customer_prompt = fake_llm.chat_requests[0]["messages"][0]["content"]
    assert task["instructions"].strip() in customer_prompt and "客服" in customer_prompt


def test_a_wrong_scripted_call_reaches_the_agent_as_the_benchmarks_error(fake_llm, db, ecom_tasks):
    task = next(t for t in ecom_tasks if t["id"] == "0")
    fake_llm.use_for("actor", "user_simulator")
    fake_llm.reply_text("帮我把订单999加急。")
    fake_llm.reply_tool_call("manage_urgent_tool", {"platform": "jd", "shop_id": task["shop_id"],
                                                    "user_id": task["user_id"], "order_id": "999"})
    fake_llm.reply_text("抱歉，没有找到这个订单。")
    fake_llm.reply_text(STOP)
    outcome = ECOM.play(task=task, agent=LLMAgent(environment=ECOM),
                        customer=LLMCustomer(task=task, environment=ECOM))
    tool_message = next(m for m in outcome.messages if m["role"] == "tool")
    assert not tool_message["ok"] and tool_message["content"].startswith("Error: 没有找到jd店铺")
    assert outcome.reward.reward == 0.0 and outcome.reward.breakdown["actions"] == 0.0
