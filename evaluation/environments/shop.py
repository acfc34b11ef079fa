"""The shop (evaluation.shop) as an environment: the first one, and the default of every task.

Only this module and the shop's own package import the shop; everything else reaches it through
`environment("shop")`."""
import random

from evaluation.environments.protocol import DEFAULT_MAX_TURNS, ERROR_KINDS, STOP, RewardResult
from evaluation.shop import catalogue
from evaluation.shop.customers import AgendaCustomer, render_intent
from evaluation.shop.episode import episode_play, transcript_rescore
from evaluation.shop.errors import errors_observed
from evaluation.shop.generator import TODAY
from evaluation.shop.reward import REWARD_VERSION, mentions, reward_source_hash
from evaluation.shop.scripted_agent import ScriptedAgent
from evaluation.shop.task_content import task_content_changes, task_content_hash
from evaluation.shop.task_specs import tasks_generate
from evaluation.shop.tools import tool_schemas
from evaluation.shop.validate import spec_errors

_AGENT_RULES = (
    "You are the customer-service assistant of an online shop selling household appliances and clothing. "
    f"Today is {TODAY.isoformat()}. Use the tools to look things up and to make changes. Rules: identify the "
    "customer (customer ID, email or phone) before looking up or changing their orders; never guess or invent "
    "order numbers — when the customer has none, list the customer's orders; before any change, say exactly "
    "what you will do and ask the customer to confirm; tell the customer the facts the tools return (dates as "
    "YYYY-MM-DD, amounts with two decimals); transfer to a human agent when the customer asks for one or the "
    "request is outside policy.\n\nShop policies:\n"
)

_CUSTOMER_RULES = (
    "You are role-playing a customer talking to an online shop's assistant; the other side's messages are the "
    "assistant's. Stay in character. Bring up your requests one at a time, in order. Reveal a fact only when "
    "the assistant asks for it, and only facts given here: never invent order numbers, ids or details; if "
    "asked for something you do not know, say so. Confirm a change when the assistant asks. Write short, "
    f"natural messages. When all your requests are handled, or you run out of patience, end your message "
    f"with {STOP}."
)


class ShopEnvironment:
    name = "shop"
    label = "Online shop (appliances and clothing)"
    builtin_set_name = "shop-130"
    builtin_set_description = ("The built-in shop tasks: 53 household appliances and 77 clothing, generated over "
                               "the seeded shop.")
    error_kinds = ERROR_KINDS
    reward_version = REWARD_VERSION
    reward_components = ("state", "grounded", "lookups", "outputs")
    content_labels = {"instruction": "instruction", "gold_actions": "gold actions", "gold_lookups": "look-ups",
                      "required_outputs": "outputs"}

    def builtin_tasks(self) -> list[dict]:
        return tasks_generate()

    def spec_errors(self, raw: dict) -> tuple[dict | None, list[str]]:
        return spec_errors(raw)

    def content_hash(self, spec: dict) -> str:
        return task_content_hash(spec)

    def content_changes(self, old: dict, new: dict) -> list[str]:
        return task_content_changes(old, new)

    def reward_source_hash(self) -> str:
        return reward_source_hash()

    def tool_schemas(self) -> list[dict]:
        return tool_schemas()

    def agent_policy(self, task: dict | None = None) -> str:
        return _AGENT_RULES + "\n".join(f"- {title}: {text}" for _, title, text in catalogue.POLICIES)

    def customer_policy(self, task: dict | None = None) -> str:
        return _CUSTOMER_RULES

    def play(self, *, task: dict, agent, customer, memory=None, max_turns: int = DEFAULT_MAX_TURNS,
             infra_errors: tuple[type[Exception], ...] = (), on_turn=None):
        return episode_play(task=task, agent=agent, customer=customer, memory=memory, max_turns=max_turns,
                            infra_errors=infra_errors, on_turn=on_turn)

    def rescore(self, *, task: dict, transcript: list[dict], played: dict) -> RewardResult:
        return transcript_rescore(task=task, transcript=transcript, shop_seed=played["shop_seed"])

    def scripted_agent(self, *, seed: int, key: str, error_rates: dict[str, float] | None = None):
        return ScriptedAgent(seed=seed, key=key, error_rates=error_rates)

    def scripted_customer(self, *, task: dict, seed: int):
        return AgendaCustomer(task=task, seed=seed)

    def errors_observed(self, *, calls: list[dict], breakdown: dict, invented_ids: list[str]) -> list[dict]:
        return errors_observed(calls=calls, breakdown=breakdown, invented_ids=invented_ids)

    def tells(self, value: str, text: str) -> bool:
        return mentions(value, text)

    def wishes(self, task: dict, seed: int) -> str:
        # Each request phrased by its own generator from the seed, as the offline critique always has.
        return " ".join(render_intent(intent, random.Random(seed)) for intent in task["intents"])


SHOP = ShopEnvironment()
