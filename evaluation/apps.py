from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"
    # Read by memweb.registry: navigation entries, home counts, worker beats, trajectory sources and
    # the Django model permissions each role's group receives.
    nav_items: tuple = (
        ("Tasks", "evaluation:task_list", ("operator",)),
        ("Runs", "evaluation:run_list", ("operator",)),
        ("Feedback", "evaluation:feedback_calibration", ("operator",)),
    )
    home_counts: tuple = (
        ("Runs in progress", "evaluation.runs.services.runs_count_active", ("operator",), "evaluation:run_list"),
    )
    # Called on every worker heartbeat: re-arms run watchdogs whose countdown messages were lost.
    worker_beats: tuple = ("evaluation.runs.services.runs_watch_overdue",)
    trajectory_sources: tuple = (("episodes", "evaluation.services.trajectory_source.trajectories_of_domain"),)
    role_permissions: dict = {
        "operator": ("evaluation.view_taskset", "evaluation.add_taskset", "evaluation.view_task",
                     "evaluation.add_task", "evaluation.change_task", "evaluation.view_episode",
                     "evaluation.view_evaluationrun", "evaluation.add_evaluationrun",
                     "evaluation.change_evaluationrun", "evaluation.view_trial", "evaluation.view_runepisode",
                     "evaluation.view_episodefeedback", "evaluation.view_feedbackprofile",
                     "evaluation.add_feedbackprofile", "evaluation.change_feedbackprofile",
                     "evaluation.view_calibrationsetting", "evaluation.change_calibrationsetting"),
    }
