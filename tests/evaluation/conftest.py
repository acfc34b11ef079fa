"""Fixtures shared by the evaluation tests: the generated tasks, the built-in set in the database,
and a helper that plays one offline episode."""
import copy
import functools

import pytest

from evaluation.shop.customers import AgendaCustomer
from evaluation.shop.episode import episode_play
from evaluation.shop.scripted_agent import ScriptedAgent
from evaluation.shop.task_specs import tasks_generate


@functools.cache
def _generated() -> tuple[dict, ...]:
    return tuple(tasks_generate())


@pytest.fixture
def shop_tasks() -> list[dict]:
    """The 130 generated task specs (a private copy per test)."""
    return copy.deepcopy(list(_generated()))


def task_by_template(tasks: list[dict], template: str, domain: str | None = None) -> dict:
    return next(t for t in tasks if t["template"] == template and (domain is None or t["domain"] == domain))


def play(task: dict, *, seed: int = 0, rates: dict | None = None, memory=None, agent=None, customer=None):
    """One offline episode: scripted agent (with `rates`) against the agenda customer."""
    agent = agent or ScriptedAgent(seed=seed, key=task["id"], error_rates=rates or {})
    customer = customer or AgendaCustomer(task=task, seed=seed)
    return episode_play(task=task, agent=agent, customer=customer, memory=memory)


@pytest.fixture
def builtin(db):
    from evaluation.services import taskset_builtin_load

    return taskset_builtin_load()
