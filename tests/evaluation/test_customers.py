"""The agenda customer opposite an agent that does nothing: it never thanks it (issue 21).

Written before the fix: on the old customer every test here failed, since an empty or off-topic
reply counted as the request handled ("Thank you, that's all I needed")."""
import pytest

from evaluation.shop.customers import STOP, AgendaCustomer
from tests.evaluation.conftest import play, task_by_template


class Silent:
    """An agent that answers nothing at all, or only small talk."""

    label = "silent"
    tokens_in = tokens_out = 0

    def __init__(self, says: str = ""):
        self.says = says

    def respond(self, *, text: str, memory: str, env) -> str:
        return self.says


def conversation(task: dict, agent_says: str, turns: int = 12) -> list[str]:
    customer = AgendaCustomer(task=task, seed=0)
    replies = [customer.opening()]
    while STOP not in replies[-1] and len(replies) < turns:
        replies.append(customer.respond(agent_says))
    return replies


@pytest.mark.parametrize("agent_says", ["", "   ", "The weather is lovely today.", "Hello! How can I help you today?"])
def test_it_never_thanks_an_agent_that_did_nothing(shop_tasks, agent_says):
    task = task_by_template(shop_tasks, "track_order")
    replies = conversation(task, agent_says)
    assert not any("thank" in reply.lower() for reply in replies[1:])
    assert replies[-1].endswith(STOP), "it gives up in the end"
    # One reply per point of patience: the last point spent ends the conversation.
    assert len(replies) - 1 == task["persona"]["patience"]


def test_it_repeats_its_request_with_rising_frustration(shop_tasks):
    task = task_by_template(shop_tasks, "cancel_order")
    task["persona"]["patience"] = 4
    _, *pressing, last = conversation(task, "")
    assert len(pressing) == 3 and len(set(pressing)) == 3, "each time in other words"
    for reply in pressing:
        assert "cancel" in reply.lower(), "it restates what it wants"
    assert "I've had enough" in last and STOP in last


def test_it_still_moves_on_when_the_agent_answers(shop_tasks):
    task = task_by_template(shop_tasks, "track_order")
    customer = AgendaCustomer(task=task, seed=0)
    customer.opening()
    assert customer.respond("") != customer.respond("Your order is in transit; it arrives 2025-06-18.")


def test_a_silent_agent_plays_a_whole_episode_without_thanks(shop_tasks):
    task = task_by_template(shop_tasks, "return_item")
    outcome = play(task, agent=Silent())
    customer_lines = [m["content"] for m in outcome.messages if m["role"] == "user"]
    assert customer_lines and not any("thank" in line.lower() for line in customer_lines[1:])
    assert outcome.reward.reward == 0

