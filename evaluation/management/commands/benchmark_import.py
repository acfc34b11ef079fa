"""Import a public benchmark from a user's checkout (or its JSON form) into a task set:
`manage.py benchmark_import tau2-retail --from PATH [--workspace SLUG] [--task-set NAME]`.

Runs the import job's work in this process and prints its progress; with --queue it is queued for a
Celery worker instead, and the job's id and status URL are printed.
"""
from django.core.management import BaseCommand, CommandError
from django.urls import reverse

from evaluation.services.benchmarks import JOB_KIND, BenchmarkImportError, benchmark_environment, benchmark_import
from memweb.jobs import job_start
from memweb.models import Workspace, default_workspace_id


class Command(BaseCommand):
    help = "Import a benchmark's tasks (tau2-retail, ecom-bench, ...) from a checkout or its JSON folder."

    def add_arguments(self, parser):
        parser.add_argument("benchmark", help="the benchmark environment's name, e.g. tau2-retail")
        parser.add_argument("--from", dest="path", required=True, help="the checkout or JSON folder to read")
        parser.add_argument("--workspace", default="", help="the workspace's slug (default: the default workspace)")
        parser.add_argument("--task-set", default="", help="the task set to fill (default: the benchmark's name)")
        parser.add_argument("--queue", action="store_true", help="queue the import as a job for a worker")

    def handle(self, *args, benchmark: str, path: str, workspace: str, task_set: str, queue: bool, **options):
        space = self._workspace(workspace)
        try:
            benchmark_environment(benchmark)
        except BenchmarkImportError as exc:
            raise CommandError(str(exc)) from None
        if queue:
            job = job_start(kind=JOB_KIND, title=f"Import {benchmark} from {path}", workspace=space,
                            payload={"benchmark": benchmark, "path": path, "task_set": task_set})
            self.stdout.write(f"Queued job #{job.pk}; its status: {reverse('api:job_status', kwargs={'job_id': job.pk})}")
            return
        try:
            report = benchmark_import(benchmark=benchmark, path=path, workspace=space, task_set_name=task_set,
                                      progress=self._progress)
        except BenchmarkImportError as exc:
            raise CommandError(str(exc)) from None
        splits = ", ".join(f"{name} {count}" for name, count in sorted(report.splits.items()))
        self.stdout.write(self.style.SUCCESS(
            f"Task set {report.task_set.name}: {report.created} created, {report.updated} updated "
            f"({report.new_versions} new versions); splits: {splits}."))

    def _progress(self, done: int, total: int | None = None, message: str = "") -> None:
        self.stdout.write(f"[{done}/{total}] {message}" if total else message)

    @staticmethod
    def _workspace(slug: str) -> Workspace:
        if not slug:
            return Workspace.objects.get(pk=default_workspace_id())
        found = Workspace.objects.filter(slug=slug).first()
        if found is None:
            raise CommandError(f"no workspace {slug!r}")
        return found

