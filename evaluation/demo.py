"""Demo data of the evaluation core: the built-in task set, a few scripted episodes to read, and a
task set of each public benchmark whose data lies on this machine (it is never shipped: see
docs/BENCHMARKS.md). The demo runs are evaluation.runs.demo's, which loads this first."""
from evaluation.configs import AgentBackend, MemoryKind
from evaluation.environments.benchmark import benchmarks_dir
from evaluation.models import Episode, TaskSet
from evaluation.services import episode_run, taskset_builtin_load
from evaluation.services.benchmarks import BenchmarkImportError, benchmark_import, benchmark_names
from memweb.models import Workspace, default_workspace_id

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


def _demo_benchmarks(stdout) -> None:
    """Each benchmark's tasks, imported once into the default workspace from
    `<benchmarks_dir>/<name>` when that folder exists."""
    workspace = Workspace.objects.get(pk=default_workspace_id())
    for name in benchmark_names():
        folder = benchmarks_dir() / name
        if not folder.is_dir():
            stdout.write(f"evaluation: no {name} data at {folder}; its demo task set is not loaded "
                         "(docs/BENCHMARKS.md says how to get it)")
            continue
        if TaskSet.objects.filter(workspace=workspace, name=name).exists():
            continue
        try:
            report = benchmark_import(benchmark=name, path=str(folder), workspace=workspace)
        except BenchmarkImportError as exc:
            stdout.write(f"evaluation: the {name} data at {folder} was not loaded: {exc}")
            continue
        stdout.write(f"evaluation: task set {report.task_set.name} with {report.created} tasks from {folder}")


def load_demo(stdout) -> TaskSet:
    """The built-in task set (returned), the scripted demo episodes and the benchmarks' task sets
    whose data is present; idempotent."""
    task_set = taskset_builtin_load()
    stdout.write(f"evaluation: task set {task_set.name} with {task_set.tasks.count()} tasks")
    _demo_episodes(task_set, stdout)
    _demo_benchmarks(stdout)
    return task_set
