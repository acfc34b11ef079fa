"""Evaluation runs' service layer: launch, orchestration (what the Celery tasks call), results,
export and import. Views, the API, tasks and the demo loader call only these."""
from evaluation.runs.services.launch import (
    MAX_CONCURRENCY, MAX_TRIALS, DMRMParams, RunLaunchError, RunSpec, run_launch, run_launch_check, run_spec_parse,
)
from evaluation.runs.services.orchestration import (
    RunActionError, episode_seed, memory_config_of, run_advance, run_cancel, run_drive, run_episode_execute,
    run_pending_memories, run_resume, run_retry_errors, run_start, run_sweep, run_watch, runs_sweep,
    runs_watch_overdue, trial_finish, watch_interval, window_fill,
)
from evaluation.runs.services.results import (
    TaskDifference, run_charts, run_errors, run_heatmap, run_matrix, run_metrics_compute, run_progress,
    runs_compare, runs_count_active, runs_filtered,
)
from evaluation.runs.services.transfer import (
    RunImportError, run_export_csv, run_export_json, run_import, run_import_parse,
)

__all__ = [
    "DMRMParams", "MAX_CONCURRENCY", "MAX_TRIALS", "RunActionError", "RunImportError", "RunLaunchError", "RunSpec",
    "TaskDifference", "episode_seed", "memory_config_of", "run_advance", "run_cancel",
    "run_charts", "run_drive", "run_episode_execute", "run_errors", "run_export_csv", "run_export_json",
    "run_heatmap", "run_import", "run_import_parse", "run_launch", "run_launch_check", "run_matrix",
    "run_metrics_compute", "run_pending_memories", "run_progress", "run_resume", "run_retry_errors", "run_spec_parse",
    "run_start", "run_sweep", "run_watch", "runs_compare", "runs_count_active", "runs_filtered", "runs_sweep",
    "runs_watch_overdue", "trial_finish", "watch_interval", "window_fill",
]
