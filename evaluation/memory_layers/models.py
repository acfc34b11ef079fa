"""What the external memory layer (external.py) keeps of a run: how to reach its service, and what
each learning call did. Registered with the evaluation app (evaluation.apps.SUBMODULE_MODELS)."""
from django.db import models

from memweb.scoping import AllWorkspacesManager, WorkspaceManager


class ExternalMemoryAccess(models.Model):
    """A run's memory on an external service: its URL, its key and the run's namespace there.

    The key is kept as it is, as a webhook's secret is: every call sends it. It never enters the run's
    spec, its export or a page; the run page shows the URL and the service's name only."""

    WORKSPACE_PATH = "run__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    run = models.OneToOneField("evaluation.EvaluationRun", on_delete=models.CASCADE, related_name="external_memory")
    url = models.URLField(max_length=500)
    key = models.CharField(max_length=500, blank=True)
    namespace = models.CharField(max_length=200, unique=True)
    service = models.JSONField(default=dict, blank=True, help_text="The service's describe answer at launch.")
    snapshots = models.JSONField(default=list, blank=True,
                                 help_text="At each trial's end: the namespace's snapshot, or the error asking for it.")

    def __str__(self) -> str:
        return f"{self.run} · {self.url}"


class ExternalLearning(models.Model):
    """One finished episode sent to the service's learn call: what came back, or why nothing did.
    Its existence also says the episode was sent, so a retried trial end does not send it twice."""

    WORKSPACE_PATH = "run_episode__run__workspace"
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    run_episode = models.OneToOneField("evaluation.RunEpisode", on_delete=models.CASCADE,
                                       related_name="external_learning")
    learned = models.PositiveIntegerField(default=0)
    attempts = models.PositiveSmallIntegerField(default=0)
    latency_ms = models.FloatField(default=0)
    error = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"{self.run_episode} · {'error' if self.error else self.learned}"
