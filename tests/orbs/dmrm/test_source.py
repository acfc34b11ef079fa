"""Source memories: steps from episodes, thresholds with a preview, and runs never changing them."""
import pytest

from orbs.dmrm.models import Experience, SourceMemory
from orbs.dmrm.services import (
    experience_append,
    experiences_retrieve,
    source_memory_build,
    source_memory_preview,
)
from orbs.errors import OrbsError
from tests.orbs.dmrm.conftest import shop_trajectory


def test_it_previews_steps_with_q_and_thresholds():
    preview = source_memory_preview(trajectories=[shop_trajectory("ok"), shop_trajectory("bad", success=False,
                                                                                        reward=0.0)],
                                    gamma=0.5, min_reward=1.0, min_q=0.6)
    assert [(c.trajectory_id, c.step, c.q_value, c.included) for c in preview] == [
        ("ok", 0, 0.5, False), ("ok", 1, 1.0, True), ("bad", 0, 0.0, False), ("bad", 1, 0.0, False)]
    first = preview[0]
    assert first.goal == "I want to return the jacket from order W7" and first.action == 'get_order({"order_id": "W7"})'
    assert preview[1].observation == 'Yes, return it please\nTool result: {"status": "delivered"}'
    assert preview[1].reward == 1.0 and first.reward == 0.0 and "Q 0.500 (min 0.6)" in first.reason


def test_it_builds_once_and_runs_leave_it_unchanged(dmrm):
    memory = source_memory_build(bank=dmrm.bank, name="clothing", source_domain="clothing", gamma=0.9,
                                 min_reward=1.0, min_q=0.0, trajectories=[shop_trajectory("x1")])
    fields = ("id", "q_value", "visits", "reward", "status", "updated_at")
    before = list(memory.experiences.order_by("id").values_list(*fields))
    assert len(before) == 2
    for entry in memory.experiences.all():  # a run meets exactly the source's states and actions
        experience_append(bank=dmrm.bank, trajectory_id="run", step=entry.step, goal=entry.goal,
                          observation=entry.observation, action=entry.action, reward=5.0,
                          next_observation=entry.next_observation)
    experiences_retrieve(bank=dmrm.bank, goal=entry.goal, observation=entry.observation)
    assert list(memory.experiences.order_by("id").values_list(*fields)) == before
    assert Experience.objects.filter(memory="target").count() == 2
    with pytest.raises(OrbsError, match="already has a source memory"):
        source_memory_build(bank=dmrm.bank, name="clothing", source_domain="clothing", gamma=0.9, min_reward=1.0,
                            min_q=0.0, trajectories=[shop_trajectory("x2")])
    assert SourceMemory.objects.count() == 1 and memory.experiences.count() == 2
