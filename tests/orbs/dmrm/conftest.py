"""Builders shared by the DMRM tests: a bank, its settings, trajectories for source memories."""
import pytest

from orbs.dmrm.models import DMRMSettings
from orbs.services import bank_get_or_create


@pytest.fixture
def bank(db):
    return bank_get_or_create(name="DMRM shop")


@pytest.fixture
def dmrm(bank):
    """The bank's DMRM settings with α = 0.5, γ = 0.9 (the hand-computed MDP uses them)."""
    return DMRMSettings.objects.create(bank=bank, alpha=0.5, gamma=0.9, c_max=400, n_success=2)


def shop_trajectory(task_id: str, *, success: bool = True, reward: float = 1.0, domain: str = "clothing") -> dict:
    """Two tool calls: look the order up, then return the item."""
    return {
        "task_id": task_id, "domain": domain, "customer_key": "c1", "reward": reward, "success": success,
        "messages": [
            {"role": "user", "content": "I want to return the jacket from order W7"},
            {"role": "assistant", "content": "",
             "tool_calls": [{"name": "get_order", "arguments": {"order_id": "W7"}}]},
            {"role": "tool", "tool_name": "get_order", "content": '{"status": "delivered"}'},
            {"role": "user", "content": "Yes, return it please"},
            {"role": "assistant", "content": "",
             "tool_calls": [{"name": "return_item", "arguments": {"order_id": "W7"}}]},
            {"role": "tool", "tool_name": "return_item", "content": '{"ok": true}'},
        ],
    }


def build_approved(bank, name: str = "clothing", **thresholds):
    """A source memory of one successful episode (approved by the build)."""
    from orbs.dmrm.services import source_memory_build

    options = {"gamma": 0.9, "min_reward": 1.0, "min_q": 0.0} | thresholds
    return source_memory_build(bank=bank, name=name, source_domain="clothing",
                               trajectories=[shop_trajectory(f"{name}-1")], **options)
