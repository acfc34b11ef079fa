"""Evaluation runs' service layer: the spec and launch, the protocol (what the Celery tasks
call), the watchdog, operator actions, the run's memory, results, export and import. Views, the
API, tasks and the demo loader call only these."""
from evaluation.runs.services.actions import RunActionError, run_cancel, run_resume, run_retry_errors
from evaluation.runs.services.compare import (
    DEFAULT_SORT,
    FLIP_SORTS,
    RunsNotComparable,
    runs_comparable_check,
    runs_compare,
)
from evaluation.runs.services.curve import (
    MAX_CURVE_BATCHES,
    CurveLaunchError,
    curve_chart,
    curve_drive,
    curve_launch,
    curve_launch_inline,
    curve_step,
)
from evaluation.runs.services.drive import run_drive
from evaluation.runs.services.launch import run_launch, run_launch_check, run_launch_validate, run_preparation_job
from evaluation.runs.services.memory import run_memory_config, run_pending_memories
from evaluation.runs.services.pins import (
    change_summary,
    run_pins_out,
    run_pins_record,
    run_regrade_current,
    run_regrade_latest,
    run_staleness,
    runs_staleness_annotate,
)
from evaluation.runs.services.planner import run_outcomes, runs_plan_trials
from evaluation.runs.services.protocol import (
    chunk_size,
    episode_seed,
    run_advance,
    run_episodes_execute,
    run_start,
    run_watch,
    trial_finish,
    watch_interval,
    window_fill,
)
from evaluation.runs.services.regrade import (
    RegradeRefused,
    regrade_flips,
    regrade_side_by_side,
    run_regrade_job_active,
    run_regrade_start,
)
from evaluation.runs.services.results import (
    run_charts,
    run_detectable_effect,
    run_errors,
    run_heatmap,
    run_matrix,
    run_metrics_compute,
    run_progress,
    runs_count_active,
    runs_filtered,
)
from evaluation.runs.services.spec import (
    MAX_CONCURRENCY,
    MAX_TRIALS,
    DMRMParams,
    RunLaunchError,
    RunSpec,
    run_spec_parse,
)
from evaluation.runs.services.splits import run_measured_text
from evaluation.runs.services.studies import (
    MAX_EPISODES,
    SELECTIONS,
    SHOWN_IDS,
    StudyError,
    episodes_to_campaign_start,
    episodes_to_task_set,
    run_episodes_select,
    study_episodes,
    study_selection,
)
from evaluation.runs.services.transfer import (
    RunImportError,
    run_export_csv,
    run_export_json,
    run_import,
    run_import_parse,
    run_imported_feedback,
)
from evaluation.runs.services.watchdog import run_sweep, runs_sweep, runs_watch_overdue

__all__ = [
    "MAX_CURVE_BATCHES", "CurveLaunchError", "curve_chart", "curve_drive", "curve_launch", "curve_launch_inline",
    "curve_step",
    "DEFAULT_SORT", "DMRMParams", "chunk_size", "FLIP_SORTS", "MAX_CONCURRENCY", "MAX_TRIALS", "RunActionError", "RunImportError",
    "RunLaunchError", "RunSpec", "RunsNotComparable", "episode_seed", "run_advance", "run_cancel", "run_charts",
    "run_detectable_effect", "run_drive", "run_episodes_execute", "run_errors", "run_export_csv", "run_export_json",
    "run_heatmap", "run_import", "run_import_parse", "run_imported_feedback", "run_launch", "run_launch_check",
    "run_launch_validate", "run_matrix", "run_preparation_job",
    "run_memory_config", "run_metrics_compute", "run_outcomes", "run_pending_memories", "run_progress", "run_resume",
    "run_retry_errors", "run_spec_parse", "run_start", "run_sweep", "run_watch", "runs_comparable_check",
    "runs_compare", "runs_count_active", "runs_filtered", "runs_plan_trials", "runs_sweep", "runs_watch_overdue", "trial_finish",
    "watch_interval", "window_fill",
    "MAX_EPISODES", "SELECTIONS", "SHOWN_IDS", "StudyError", "episodes_to_campaign_start", "episodes_to_task_set",
    "run_episodes_select", "study_episodes", "study_selection",
    "RegradeRefused", "change_summary", "regrade_flips", "regrade_side_by_side", "run_pins_out", "run_pins_record",
    "run_regrade_current", "run_regrade_job_active", "run_regrade_latest", "run_regrade_start", "run_staleness",
    "runs_staleness_annotate",
    "run_measured_text",
]
