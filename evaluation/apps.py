from importlib import import_module

from django.apps import AppConfig

# Packages above the evaluation core that keep their models in their own modules (runs, feedback, the
# memory layers);
# registered with this app after the core's own models.
SUBMODULE_MODELS = ("evaluation.feedback.models", "evaluation.runs.models", "evaluation.memory_layers.models",
                    "evaluation.scores.models")


class EvaluationConfig(AppConfig):
    name = "evaluation"
    # Read by memweb.registry: navigation entries, home counts, worker beats, trajectory sources and
    # the Django model permissions each role's group receives.
    nav_items: tuple = (
        ("Tasks", "evaluation:task_list", ("operator",)),
        ("Runs", "evaluation:run_list", ("operator",)),
        ("Memory layers", "evaluation:memory_layers_board", ("operator",)),
        ("Feedback", "evaluation:feedback_calibration", ("operator",)),
    )
    home_counts: tuple = (
        ("Runs in progress", "evaluation.runs.services.runs_count_active", ("operator",), "evaluation:run_list"),
        ("Runs failed in the last 7 days", "evaluation.runs.services.dashboard.runs_count_failed_recently",
         ("operator",), "evaluation:run_list?status=failed"),
    )
    home_charts: tuple = (
        ("Success rate by memory mode", "evaluation.runs.services.dashboard.success_by_memory_mode", ("operator",)),
        ("Success rate by model", "evaluation.runs.services.dashboard.success_by_model", ("operator",)),
    )
    # Called on every worker heartbeat: re-arms run watchdogs whose countdown messages were lost.
    worker_beats: tuple = ("evaluation.runs.services.runs_watch_overdue",)
    trajectory_sources: tuple = (("episodes", "evaluation.services.trajectory_source.trajectories_of_domain"),)
    # Called by orbs' customer erasure: episodes quote the prompt blocks their memories gave them.
    erasure_hooks: tuple = (("evaluation_episodes", "evaluation.services.erasure.episode_memories_scrub"),)
    # A finished run's stored verdicts, for the A/A calibration command (evaluation core) to read.
    outcome_sources: tuple = (("runs", "evaluation.runs.services.run_outcomes"),)
    # Linked from annotation campaigns: runs and episodes add their conversations to a campaign.
    study_sources: tuple = (("Evaluation runs", "evaluation:run_list"),)
    # Read by memweb.registry: the functions background jobs of these kinds run (memweb.jobs).
    job_kinds: tuple = (("evaluation.run_regrade", "evaluation.runs.services.regrade.run_regrade_job"),
                        ("evaluation.episodes_to_campaign", "evaluation.runs.services.studies.episodes_to_campaign_job"),
                        ("evaluation.run_prepare", "evaluation.runs.services.launch.run_prepare_job"),
                        ("evaluation.benchmark_import", "evaluation.services.benchmarks.benchmark_import_job"),
                        ("evaluation.run_score", "evaluation.scores.services.run_score_job"),
                        ("evaluation.task_set_score", "evaluation.scores.services.task_set_score_job"))
    # Read by memweb.registry: evaluation's own words (evaluation.vocabulary): the scopes its routes
    # ask for, the webhook events it announces, the LLM roles its agents, customers and feedback call.
    api_scopes: tuple = ("evaluation.vocabulary.EvaluationScope",)
    webhook_events: tuple = ("evaluation.vocabulary.EvaluationEvent",)
    llm_roles: tuple = ("evaluation.vocabulary.EvaluationLLMRole",)
    # Read by evaluation.memory_layers.registry: the built-in memory layers (third-party ones come from
    # the `memweb.memory_layers` entry-point group).
    memory_layers: tuple = ("evaluation.memory_layers.none.NoMemory", "evaluation.memory_layers.memorb.MemOrbLayer",
                            "evaluation.memory_layers.dmrm.DMRMLayer", "evaluation.memory_layers.both.BothLayer",
                            "evaluation.memory_layers.naive_rag.BM25Message",
                            "evaluation.memory_layers.naive_rag.BM25Dialog",
                            "evaluation.memory_layers.naive_rag.EmbedderMessage",
                            "evaluation.memory_layers.naive_rag.EmbedderDialog",
                            "evaluation.memory_layers.external.ExternalLayer")
    # Read by memweb's load_demo: the runs' demo, which loads the core's (evaluation.demo) first.
    demo_module = "evaluation.runs.demo"
    role_permissions: dict = {
        "operator": ("evaluation.view_taskset", "evaluation.add_taskset", "evaluation.view_task",
                     "evaluation.add_task", "evaluation.change_task", "evaluation.view_episode",
                     "evaluation.view_evaluationrun", "evaluation.add_evaluationrun",
                     "evaluation.change_evaluationrun", "evaluation.view_trial", "evaluation.view_runepisode",
                     "evaluation.view_episodefeedback", "evaluation.view_feedbackprofile",
                     "evaluation.add_feedbackprofile", "evaluation.change_feedbackprofile",
                     "evaluation.view_calibrationsetting", "evaluation.change_calibrationsetting",
                     "evaluation.view_scoredefinition", "evaluation.add_scoredefinition",
                     "evaluation.change_scoredefinition", "evaluation.view_episodescore"),
    }

    def import_models(self) -> None:
        # Here rather than by evaluation.models importing them, so the core imports no higher level.
        super().import_models()
        for module in SUBMODULE_MODELS:
            import_module(module)

    def ready(self) -> None:
        import evaluation.runs.tasks  # noqa: F401  (Celery autodiscovers only evaluation.tasks)
        from evaluation.environments import benchmark, environment_register
        from evaluation.environments.ecom_bench.tools import image_describer_set
        from evaluation.environments.tau2_retail.reward import assertion_judge_set
        from evaluation.services.benchmark_judges import assertions_judge, image_describe
        from evaluation.services.benchmark_worlds import world_load

        # The built-in environments; installed packages add theirs by entry point (docs/ENVIRONMENTS.md).
        environment_register("shop", "evaluation.environments.shop:SHOP")
        environment_register("tau2-retail", "evaluation.environments.tau2_retail:TAU2_RETAIL")
        environment_register("ecom-bench", "evaluation.environments.ecom_bench:ECOM")
        # Benchmark environments read their shared databases from the BenchmarkWorld table, and ask
        # memweb's LLM roles what needs a model (offline they say it was not judged, or not available).
        benchmark.world_loader_set(world_load)
        assertion_judge_set(assertions_judge)
        image_describer_set(image_describe)
