"""The Orbs app's service layer; other apps call these functions, never the models' internals."""
from orbs.backends.reflector import ReflectionStyle
from orbs.backends.rewriter import dialogue_window
from orbs.services.banks import (
    bank_budget_cut,
    bank_get_or_create,
    bank_policy_update,
    bank_resolve,
    bank_stats,
    banks_all,
    count_pending,
)
from orbs.services.identity import orb_current, orb_revision, orb_revisions, orbs_current_only
from orbs.services.ingest import (
    OrbIngestResult,
    episode_reflect,
    episode_submit,
    orb_from_episode,
    orb_remember,
    trajectory_parse,
)
from orbs.services.ingest_batch import EpisodeToRemember, orbs_from_episodes
from orbs.services.provenance import orb_provenance
from orbs.services.retrieval import (
    Hit,
    RetrievalResult,
    orb_retrieval_outcomes,
    orbs_retrievable,
    orbs_retrieve,
    orbs_search,
    retrieval_outcome_record,
)
from orbs.services.review import (
    orb_approve,
    orb_edit,
    orb_flag,
    orb_merge,
    orb_reject,
    orbs_bulk_review,
    orbs_pending_approve,
    orbs_pending_count,
)
from orbs.services.snapshot import bank_snapshot
from orbs.services.transfer import (
    ImportReport,
    bank_copy,
    bank_copy_start,
    bank_export,
    bank_import,
    bank_import_start,
)

__all__ = [
    "Hit", "ImportReport", "OrbIngestResult", "ReflectionStyle", "RetrievalResult", "bank_budget_cut", "bank_copy", "bank_export",
    "bank_get_or_create", "dialogue_window",
    "bank_import", "bank_import_start", "bank_copy_start", "bank_policy_update", "bank_resolve", "bank_stats", "banks_all",
    "count_pending", "episode_reflect", "episode_submit", "orb_approve", "orb_edit", "orb_flag", "orb_from_episode",
    "orb_current", "orb_provenance", "orb_remember", "orb_revision", "orb_revisions", "orbs_current_only",
    "orb_merge", "orb_reject", "orbs_bulk_review", "orbs_pending_approve", "orbs_pending_count", "orbs_retrievable",
    "orb_retrieval_outcomes", "orbs_retrieve", "orbs_search", "retrieval_outcome_record", "trajectory_parse",
    "EpisodeToRemember", "orbs_from_episodes", "bank_snapshot",
]
