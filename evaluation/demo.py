"""Demo data of the evaluation core: the built-in task set and a few scripted episodes to read.
The demo runs are evaluation.runs.demo's, which loads this first."""
from evaluation.configs import AgentBackend, MemoryKind
from evaluation.models import Episode, TaskSet
from evaluation.services import episode_run, taskset_builtin_load

DEMO_EPISODES = (("shop-clo-008", {}), ("shop-clo-008", {"wrong_tool": 1.0}), ("shop-app-023", {}),
                 ("shop-app-023", {"result_unused": 1.0}))


def _demo_episodes(task_set, stdout) -> None:
    made = 0
    for external_id, rates in DEMO_EPISODES:
        task = task_set.tasks.get(external_id=external_id)
        config = {"backend": AgentBackend.SCRIPTED, "error_rates": rates}
        if not Episode.objects.filter(task=task, agent_config__error_rates=rates, memory_kind=MemoryKind.NONE).exists():
            episode_run(task=task, agent_config=config, seed=0)
            made += 1
    stdout.write(f"evaluation: {made} scripted demo episode(s) played")


def load_demo(stdout) -> TaskSet:
    """The built-in task set (returned) and the scripted demo episodes; idempotent."""
    task_set = taskset_builtin_load()
    stdout.write(f"evaluation: task set {task_set.name} with {task_set.tasks.count()} tasks")
    _demo_episodes(task_set, stdout)
    return task_set
