"""Annotation services; import from here (`from annotation.services import ...`)."""
from annotation.services.allocation import (
    assignment_active,
    assignment_next,
    assignments_reclaim,
    feedback_task_active,
    feedback_task_next,
    feedback_tasks_reclaim,
    items_available,
    split_item_ids,
)
from annotation.services.campaigns import (
    CampaignStateError,
    campaign_has_judgments,
    campaign_status_change,
    criteria_problem,
    item_facets,
    items_filter,
)
from annotation.services.exports import judgment_records, records_render, result_records
from annotation.services.intake import (
    ImportReport, RowProblem, items_from_conversations, items_import, upload_parse, upload_read,
)
from annotation.services.judging import (
    SubmitError,
    Submitted,
    assignment_open,
    feedback_task_submit,
    judgment_submit,
    side_options,
)
from annotation.services.quality import (
    OPERATOR_DECISIONS, attention_due, participant_decide, participant_score, participant_standing, side_balanced,
)
from annotation.services.results import (
    campaign_action_fit, campaign_action_pairs, campaign_progress, campaign_results, conversations_compared,
)
from annotation.services.transfer import campaign_export_lines, campaign_export_render, campaign_import

__all__ = [
    "OPERATOR_DECISIONS", "attention_due", "campaign_action_fit", "campaign_action_pairs", "campaign_export_lines",
    "campaign_export_render", "campaign_import", "conversations_compared",
    "participant_decide", "participant_score", "participant_standing", "side_balanced", "split_item_ids",
    "CampaignStateError", "ImportReport", "RowProblem", "SubmitError", "Submitted",
    "assignment_active", "assignment_next", "assignment_open", "assignments_reclaim", "campaign_has_judgments",
    "campaign_progress", "campaign_results", "campaign_status_change", "criteria_problem", "feedback_task_active",
    "feedback_task_next", "feedback_task_submit", "feedback_tasks_reclaim", "item_facets", "items_available",
    "items_filter", "items_from_conversations", "items_import", "judgment_records", "judgment_submit",
    "records_render", "result_records", "side_options", "upload_parse", "upload_read",
]
