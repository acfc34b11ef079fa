"""Builders shared by the Orbs tests: banks, trajectories, Orbs made by the real pipeline, and an
agent calling the API with a key."""
import copy
import itertools
import json

import pytest

from orbs.models import Orb
from orbs.schemas import TRAJECTORY_EXAMPLE
from orbs.services import bank_get_or_create, orb_approve, orb_from_episode
from tests.fakes.openai_server import fake_llm  # noqa: F401  (fixture, until conftest lists the plugin)

_tasks = itertools.count(1)


def trajectory(**overrides) -> dict:
    """The OpenAPI example episode (a failed return: wrong tool), with fields replaced."""
    data = copy.deepcopy(TRAJECTORY_EXAMPLE)
    data["task_id"] = f"task-{next(_tasks)}"
    return data | overrides


def success_trajectory(text: str, **overrides) -> dict:
    """A resolved episode whose only customer turn is `text`."""
    fields = {"messages": [{"role": "user", "content": text},
                           {"role": "assistant", "content": "Done.",
                            "tool_calls": [{"name": "get_order", "arguments": {"order_id": "W1"}}]},
                           {"role": "tool", "tool_name": "get_order", "content": '{"order_id": "W1"}'},
                           {"role": "assistant", "content": "All set."}],
              "reward": 1.0, "success": True, "reward_breakdown": {"done": True}, "errors": [], "metadata": {}}
    return trajectory(**(fields | overrides))


@pytest.fixture
def bank(db):
    return bank_get_or_create(name="Test shop")


@pytest.fixture
def make_orb(bank):
    def make(text: str, *, approve: bool = True, target=None, **overrides) -> Orb:
        result = orb_from_episode(bank=target or bank, trajectory=success_trajectory(text, **overrides))
        orb = result.orb
        if approve and orb.status == Orb.Status.PENDING:
            orb = orb_approve(orb_id=orb.pk, expected_version=orb.version, actor=None)
        return orb

    return make


def post(client, url, payload, **extra):
    return client.post(url, json.dumps(payload), content_type="application/json", **extra)
