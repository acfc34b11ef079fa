"""DMRM's part of a bank's hash chain (orbs.services.history): a source-memory build is chained when
it is written. The build's record is chained (name, thresholds, episodes read, time, approval); its
experiences are not, since reviewers reject and delete single entries afterwards.

Experience events (deletions and restorations of single entries) are not chained: they are not in
the bank file, so an exported chain holding them could not be checked on import."""
from orbs.services.history import HistoryKind

SOURCE_MEMORY = HistoryKind(
    name="source_memory", model="orbs.SourceMemory", bank_path="bank_id", time_path="created_at",
    line_type="source_memory",
    fields=tuple((name, name) for name in ("name", "source_domain", "min_reward", "min_q", "gamma", "episodes_read",
                                           "created_at", "approved_at", "approval_note")),
)
