"""DMRM services: learning (the target memory's Q-table), retrieval, source memories, review."""
from orbs.dmrm.models import DMRMSettings
from orbs.dmrm.qlearning import HISTORY_ACTIONS
from orbs.dmrm.services.browse import ExperienceFilters, dmrm_stats, experiences_filtered
from orbs.dmrm.services.copy import dmrm_memory_copy
from orbs.dmrm.services.deletion import experience_delete, experience_restore
from orbs.dmrm.services.learning import (
    DMRMSettingsInvalid,
    SourceMemoryReadOnly,
    TrajectoryToLearn,
    TransitionError,
    dmrm_settings_get,
    dmrm_settings_update,
    experience_append,
    experiences_append_batch,
    experiences_from_trajectories,
    experiences_from_trajectory,
    experiences_updates,
    successful_trajectories,
    trajectories_steps,
)
from orbs.dmrm.services.retrieval import (
    DMRMHit,
    DMRMResult,
    dmrm_retrieval_outcome_record,
    experience_retrieval_outcomes,
    experiences_retrieve,
)
from orbs.dmrm.services.review import experience_flag, experience_review
from orbs.dmrm.services.source import (
    SourceCandidate,
    action_text,
    goal_text,
    source_memory_build,
    source_memory_build_start,
    source_memory_preview,
    source_trajectories_from_episodes,
    trajectory_steps,
)

Suppression = DMRMSettings.Suppression  # the choices of suppression_mode, for other apps' settings
StateMatch = DMRMSettings.StateMatch

__all__ = [
    "HISTORY_ACTIONS", "StateMatch", "Suppression", "DMRMHit", "DMRMResult", "DMRMSettingsInvalid", "ExperienceFilters",
    "SourceCandidate",
    "SourceMemoryReadOnly", "TransitionError", "action_text", "dmrm_memory_copy", "dmrm_retrieval_outcome_record",
    "dmrm_settings_get", "dmrm_settings_update", "dmrm_stats", "experience_append", "experience_delete",
    "experience_flag", "experience_restore",
    "experience_retrieval_outcomes", "experience_review",
    "experiences_append_batch", "experiences_filtered", "experiences_from_trajectory",
    "experiences_from_trajectories", "TrajectoryToLearn", "experiences_retrieve",
    "experiences_updates", "goal_text", "source_memory_build", "source_memory_build_start",
    "source_memory_preview", "source_trajectories_from_episodes", "successful_trajectories", "trajectories_steps",
    "trajectory_steps",
]
