"""A bank with an approved and a pending memory, and the API keys the MCP and adapter tests act with."""
import pytest

from memweb.models import ApiKey, Workspace
from memweb.roles import Role
from orbs.services import bank_get_or_create, orb_approve, orb_from_episode
from orbs.vocabulary import OrbsScope
from tests.orbs.conftest import success_trajectory

APPROVED_TEXT = "My blender arrived cracked, I want a refund"
PENDING_TEXT = "My blender arrived cracked, can I swap it for another colour"
LESSON = "For a cracked blender, offer a refund to the original payment method before an exchange."
SITUATION = "customer says the blender came cracked and wants a refund"


@pytest.fixture
def memory(user_for_role):
    """A bank with one approved and one pending memory, and keys: full, read-only, another workspace's."""
    bank = bank_get_or_create(name="MCP shop")
    approved = orb_from_episode(bank=bank, trajectory=success_trajectory(APPROVED_TEXT, task_id="t1")).orb
    approved = orb_approve(orb_id=approved.pk, expected_version=approved.version, actor=None)
    pending = orb_from_episode(bank=bank, trajectory=success_trajectory(PENDING_TEXT, task_id="t2")).orb
    operator = user_for_role(Role.OPERATOR)
    other_workspace = Workspace.objects.create(slug="elsewhere", name="Elsewhere")
    stranger = user_for_role(Role.OPERATOR, workspace=other_workspace)
    bank_get_or_create(name="Elsewhere shop", workspace=other_workspace)
    return {
        "bank": bank, "approved": approved, "pending": pending,
        "key": ApiKey.issue(user=operator, name="mcp agent")[1],
        "read_only_key": ApiKey.issue(user=operator, name="reader", scopes=[OrbsScope.MEMORY_READ])[1],
        "other_key": ApiKey.issue(user=stranger, name="stranger", workspace=other_workspace)[1],
    }
