"""The evaluation app's service layer; other apps call these functions, never the models' internals."""
from evaluation.services.episodes import (
    EpisodeConfigError,
    EpisodePlay,
    ReflectionInput,
    episode_ref,
    episode_run,
    episode_save,
    episode_simulate,
    episode_trajectory,
    episodes_save,
)
from evaluation.services.memory_effects import bank_effects_rank, bank_harmful_flag, orb_effects_compute
from evaluation.services.task_sets import (
    BUILTIN_SET,
    ImportReport,
    TaskCopyError,
    TasksCopied,
    environments_with_builtin_sets,
    task_create,
    task_spec_update,
    task_summary,
    tasks_copy_into,
    tasks_export_jsonl,
    tasks_filtered,
    tasks_fingerprint,
    tasks_import_jsonl,
    taskset_builtin_load,
)

__all__ = [
    "BUILTIN_SET", "EpisodeConfigError", "EpisodePlay", "ImportReport", "ReflectionInput", "bank_effects_rank",
    "bank_harmful_flag",
    "episode_ref", "episode_run", "episode_save", "episodes_save",
    "episode_simulate", "episode_trajectory", "task_create", "task_spec_update",
    "environments_with_builtin_sets", "task_summary", "taskset_builtin_load", "tasks_export_jsonl",
    "orb_effects_compute", "tasks_filtered", "tasks_fingerprint", "tasks_import_jsonl",
    "TaskCopyError", "TasksCopied", "tasks_copy_into",
]
