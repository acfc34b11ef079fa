"""The paper's No-Memory baseline: the LLM agent's prompt fits a context window (4k by default for runs
without memory), dropping the oldest customer turns and keeping the system prompt."""
from evaluation.environments.shop import SHOP
from evaluation.llm_backends import LLMAgent
from evaluation.shop.tools import tool_schemas
from memweb.embeddings import embedder

CONTEXT = 1500
ANSWER = 128


def _sent_tokens(body: dict) -> int:
    """The messages' tokens; the tool schemas go besides, uncounted (docs/FIDELITY.md)."""
    return sum(embedder().count_tokens(message["content"] or "") for message in body["messages"])


def _long_turn(n: int) -> str:
    return f"Turn {n}: my washing machine from order W{1000 + n} still leaks, " + "it is really annoying. " * 40


def test_the_llm_agent_never_sends_more_than_its_context_window(fake_llm, db):
    fake_llm.use_for("actor")
    fake_llm.set_default_text("I am sorry to hear that; let me check the order for you. " * 10)
    agent = LLMAgent(max_tokens=ANSWER, context_tokens=CONTEXT)
    for n in range(8):
        agent.respond(text=_long_turn(n), memory="", env=None)
    bodies = fake_llm.chat_requests
    assert all(_sent_tokens(body) + ANSWER <= CONTEXT for body in bodies)
    last = bodies[-1]["messages"]
    assert last[0]["role"] == "system" and last[0]["content"].startswith(SHOP.agent_policy())
    assert last[-1] == {"role": "user", "content": _long_turn(7)}
    assert last[1]["role"] == "user" and len(last) < 1 + len(agent.history)  # oldest turns dropped, whole
    assert {"role": "user", "content": _long_turn(0)} not in last


def test_without_a_window_the_agent_sends_the_whole_history(fake_llm, db):
    fake_llm.use_for("actor")
    fake_llm.set_default_text("Let me check.")
    agent = LLMAgent(max_tokens=ANSWER)
    for n in range(3):
        agent.respond(text=_long_turn(n), memory="", env=None)
    assert fake_llm.last_chat["messages"][1:] == agent.history[:-1]
    assert len(fake_llm.last_chat["tools"]) == len(tool_schemas())
