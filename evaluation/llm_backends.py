"""The LLM agent (actor role) and the LLM customer (user-simulator role), through memweb.llm.

Both keep their own chat history in the OpenAI message format; the episode loop only sees their
replies. The agent's tool calls run on the episode's shop through the same `ShopEnv` the scripted
agent uses, so scoring cannot tell the two apart.
"""
from evaluation.shop import catalogue as cat
from evaluation.shop.customers import STOP
from evaluation.shop.generator import TODAY
from evaluation.shop.tools import tool_schemas
from memweb.llm import llm_chat, role_config

GIVE_UP_REPLY = "I'm sorry, I could not finish that request."

AGENT_RULES = (
    "You are the customer-service assistant of an online shop selling household appliances and clothing. "
    f"Today is {TODAY.isoformat()}. Use the tools to look things up and to make changes. Rules: identify the "
    "customer (customer ID, email or phone) before looking up or changing their orders; never guess or invent "
    "order numbers — when the customer has none, list the customer's orders; before any change, say exactly "
    "what you will do and ask the customer to confirm; tell the customer the facts the tools return (dates as "
    "YYYY-MM-DD, amounts with two decimals); transfer to a human agent when the customer asks for one or the "
    "request is outside policy.\n\nShop policies:\n"
)

CUSTOMER_RULES = (
    "You are role-playing a customer talking to an online shop's assistant; the other side's messages are the "
    "assistant's. Stay in character. Bring up your requests one at a time, in order. Reveal a fact only when "
    "the assistant asks for it, and only facts given here: never invent order numbers, ids or details; if "
    "asked for something you do not know, say so. Confirm a change when the assistant asks. Write short, "
    f"natural messages. When all your requests are handled, or you run out of patience, end your message "
    f"with {STOP}."
)


def _policies() -> str:
    return "\n".join(f"- {title}: {text}" for _, title, text in cat.POLICIES)


class LLMAgent:
    def __init__(self, *, role: str = "actor", max_steps: int = 8, max_tokens: int | None = None):
        self.role, self.max_steps, self.max_tokens = role, max_steps, max_tokens
        self.label = f"llm:{role_config(role).model}"
        self.history: list[dict] = []
        self.tokens_in = self.tokens_out = 0

    def _system(self, memory: str) -> dict:
        memories = f"\n\n{memory}\nUse these lessons when they fit the situation." if memory else ""
        return {"role": "system", "content": AGENT_RULES + _policies() + memories}

    def respond(self, *, text: str, memory: str, env) -> str:
        self.history.append({"role": "user", "content": text})
        for _ in range(self.max_steps):
            reply = llm_chat(role=self.role, messages=[self._system(memory), *self.history], tools=tool_schemas(),
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
    def __init__(self, *, task: dict, role: str = "user_simulator", max_tokens: int | None = None):
        self.role, self.max_tokens = role, max_tokens
        self.label = f"llm:{role_config(role).model}"
        persona = task["persona"]
        self.system = {"role": "system", "content": (
            f"{CUSTOMER_RULES}\n\n{task['instructions']}\nYour mood: {persona['emotion']}; patience "
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
