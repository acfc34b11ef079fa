"""The LLM agent (actor role) and the LLM customer (user-simulator role), through memweb.llm.

Both keep their own chat history in the OpenAI message format; the episode loop only sees their
replies. With a context window (`context_tokens`, the paper's 4k for the No-Memory baseline) the
agent sends the system prompt and the latest whole customer turns that fit beside the answer,
counted with the embedding model's tokenizer (memweb's offline token counter). The tool schemas go
besides, uncounted: that tokenizer makes 2,895 tokens of their JSON, which would leave no room for
the dialogue (docs/FIDELITY.md). The agent's rules, policies and tools are its environment's
(evaluation.environments); its tool calls run on the episode's world, the same one the scripted agent
uses, so scoring cannot tell the two apart.
"""
import hashlib
import json

from evaluation.environments import DEFAULT_ENVIRONMENT, STOP, Environment, environment
from evaluation.vocabulary import EvaluationLLMRole
from memweb.embeddings import embedder
from memweb.llm import llm_chat, role_config

GIVE_UP_REPLY = "I'm sorry, I could not finish that request."
MEMORY_NOTE = "\nUse these lessons when they fit the situation."  # after the memory block in the system prompt


def prompt_template_hash(role: str, *, environment_name: str = DEFAULT_ENVIRONMENT) -> str:
    """SHA-256 of the fixed text an LLM agent ("actor") or LLM customer ("user_simulator") is
    prompted with: the environment's rules and policies (the task's own text is covered by its
    content hash)."""
    world = environment(environment_name)
    template = world.agent_policy() if role == EvaluationLLMRole.ACTOR else world.customer_policy()
    return hashlib.sha256(template.encode()).hexdigest()


def memory_room(*, context_tokens: int, answer_tokens: int, environment_name: str = DEFAULT_ENVIRONMENT) -> int:
    """Tokens a memory block may take in the agent's prompt: the context window minus the rest of
    the prompt that is always sent (rules, shop policies, the note after the memories) and the
    answer. The dialogue gets what the memory leaves (the current customer turn is always sent);
    the tool schemas go uncounted, as they do in `LLMAgent._messages`."""
    fixed = embedder().count_tokens(environment(environment_name).agent_policy() + "\n\n" + MEMORY_NOTE)
    return context_tokens - fixed - answer_tokens


def _default_environment() -> Environment:
    return environment(DEFAULT_ENVIRONMENT)


def message_tokens(message: dict) -> int:
    """A message's text and tool calls, as the tokenizer counts them."""
    count = embedder().count_tokens(message.get("content") or "")
    if message.get("tool_calls"):
        count += embedder().count_tokens(json.dumps(message["tool_calls"], ensure_ascii=False))
    return count


def history_fitted(history: list[dict], room: int) -> list[dict]:
    """The latest whole customer turns (a turn starts at a customer message, so a tool result never loses
    its call) whose tokens fit in `room`; at least the current turn, which the agent must answer."""
    starts = [i for i, message in enumerate(history) if message["role"] == "user"]
    used, keep_from = 0, starts[-1] if starts else 0
    for start, end in zip(reversed(starts), [len(history), *reversed(starts[1:])]):
        used += sum(message_tokens(message) for message in history[start:end])
        if used > room:
            break
        keep_from = start
    return history[keep_from:]


class LLMAgent:
    def __init__(self, *, role: str = EvaluationLLMRole.ACTOR, max_steps: int = 8, max_tokens: int | None = None,
                 context_tokens: int | None = None, environment: Environment | None = None, task: dict | None = None):
        self.role, self.max_steps, self.max_tokens = role, max_steps, max_tokens
        self.environment = environment or _default_environment()
        self.task = task  # its environment's policy can depend on it (a benchmark's policy lives with its world)
        self.context_tokens = context_tokens
        self.label = f"llm:{role_config(role).model}"
        self.history: list[dict] = []
        self.tokens_in = self.tokens_out = 0

    def _messages(self, memory: str) -> list[dict]:
        """What is sent: the system prompt and, within a context window, the history that fits beside it
        and the longest answer allowed."""
        system = self._system(memory)
        if self.context_tokens is None:
            return [system, *self.history]
        answer = self.max_tokens or role_config(self.role).max_tokens
        return [system, *history_fitted(self.history, self.context_tokens - answer - message_tokens(system))]

    def _system(self, memory: str) -> dict:
        memories = f"\n\n{memory}{MEMORY_NOTE}" if memory else ""
        return {"role": "system", "content": self.environment.agent_policy(task=self.task) + memories}

    def respond(self, *, text: str, memory: str, env, recall=None) -> str:
        """`recall()`, when given, is asked before each decision after the first (the tool results
        are in by then) for that step's memory block (a per-step memory such as DMRM)."""
        self.history.append({"role": "user", "content": text})
        for step in range(self.max_steps):
            if step and recall is not None:
                memory = recall()
            reply = llm_chat(role=self.role, messages=self._messages(memory), tools=self.environment.tool_schemas(),
                             max_tokens=self.max_tokens)
            self.tokens_in += reply.tokens_in
            self.tokens_out += reply.tokens_out
            if not reply.tool_calls:
                return self._say(reply.content or "")
            self._run_tools(reply, env)
        return self._say(GIVE_UP_REPLY)

    def _say(self, content: str) -> str:
        self.history.append({"role": "assistant", "content": content})
        return content

    def _run_tools(self, reply, env) -> None:
        """Execute the model's tool calls; unusable arguments become a tool error the model reads."""
        self.history.append(reply.as_message())
        calls = [(c.id, c.name, c.arguments, c.argument_error) for c in reply.tool_calls]
        results = env.execute(calls, content=reply.content or "")
        self.history += [{"role": "tool", "tool_call_id": call.id, "content": result.content}
                         for call, result in zip(reply.tool_calls, results)]


class LLMCustomer:
    def __init__(self, *, task: dict, role: str = EvaluationLLMRole.USER_SIMULATOR, max_tokens: int | None = None,
                 environment: Environment | None = None):
        self.role, self.max_tokens = role, max_tokens
        self.label = f"llm:{role_config(role).model}"
        persona, rules = task["persona"], (environment or _default_environment()).customer_policy(task)
        self.system = {"role": "system", "content": (
            f"{rules}\n\n{task['instructions']}\nYour mood: {persona['emotion']}; patience "
            f"{persona['patience']} (out of 10); trust in the shop: {persona['trust']}.")}
        self.history: list[dict] = []
        self.tokens_in = self.tokens_out = 0

    def opening(self) -> str:
        return self.respond("Hello! How can I help you today?")

    def respond(self, agent_text: str) -> str:
        self.history.append({"role": "user", "content": agent_text})
        reply = llm_chat(role=self.role, messages=[self.system, *self.history], max_tokens=self.max_tokens)
        self.tokens_in += reply.tokens_in
        self.tokens_out += reply.tokens_out
        content = (reply.content or "").strip() or STOP
        self.history.append({"role": "assistant", "content": content})
        return content
