"""Tasks (of any environment) and the episodes played on them.

An Episode is a self-contained record of one conversation: it keeps a snapshot of the task spec it
ran and every configuration, so it stays readable after tasks are edited or re-imported.
Evaluation runs (issue 6) reference episodes from their own rows — one per (run, trial, task),
unique there — instead of Episode pointing back at a run: an ad-hoc episode played from the task
page or the API needs no run, and nothing here has to be nullable for it.
"""
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models.functions import Cast
from django.urls import reverse
from django.utils import timezone

from evaluation.configs import AgentBackend, MemoryKind
from evaluation.environments.benchmark import USES_GOLD
from memweb.models import workspace_field
from memweb.scoping import AllWorkspacesManager, WorkspaceManager


class Domain(models.TextChoices):
    APPLIANCES = "appliances", "Household appliances"
    CLOTHING = "clothing", "Clothing"
    RETAIL = "retail", "Retail (τ²-bench)"


class Split(models.TextChoices):
    TRAIN = "train", "train"
    DEV = "dev", "dev"
    TEST = "test", "test"


class Difficulty(models.TextChoices):
    EASY = "easy", "easy"
    MEDIUM = "medium", "medium"
    HARD = "hard", "hard"


class ErrorKind(models.TextChoices):
    """The MemOrb paper's error kinds (values match evaluation.environments.ERROR_KINDS)."""

    WRONG_TOOL = "wrong_tool", "wrong tool"
    WRONG_ARGUMENTS = "wrong_arguments", "wrong arguments"
    RESULT_UNUSED = "result_unused", "result not used"


class TaskSet(models.Model):
    """A named collection of tasks: the 130 built-in ones, or a set a user imported; each workspace
    loads its own copy of the built-in set."""

    workspace = workspace_field("task_sets")
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    is_builtin = models.BooleanField(default=False)
    # Where an imported benchmark's tasks came from: {benchmark, source, layout, commit, files
    # (path -> SHA-256), licence, world}; empty for other sets.
    provenance = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-is_builtin", "name"]
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="task_set_unique_name")]

    def __str__(self) -> str:
        return self.name


class Task(models.Model):

    WORKSPACE_PATH = "task_set__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    task_set = models.ForeignKey(TaskSet, on_delete=models.CASCADE, related_name="tasks")
    external_id = models.CharField(max_length=100)
    # The task world it is played in (evaluation.environments registry name).
    environment = models.CharField(max_length=64, default="shop", db_index=True)
    domain = models.CharField(max_length=16, choices=Domain.choices, db_index=True)
    split = models.CharField(max_length=8, choices=Split.choices, db_index=True)
    difficulty = models.CharField(max_length=8, choices=Difficulty.choices, db_index=True)
    error_kinds = models.JSONField(default=list, blank=True)
    summary = models.CharField(max_length=300, blank=True)
    spec = models.JSONField()
    provenance = models.JSONField(default=dict, blank=True,
                                  help_text="Where a copied task came from: {run, trial, episode, task}.")
    # The current version of the spec's gradable content (its environment's content_hash); every
    # version's spec is kept in TaskVersion, so runs scored against an older one can be explained.
    version = models.PositiveIntegerField(default=1)
    content_hash = models.CharField(max_length=64, help_text="SHA-256 of the gradable content of the current version.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["task_set", "external_id"]
        constraints = [models.UniqueConstraint(fields=["task_set", "external_id"], name="task_unique_in_set")]

    def __str__(self) -> str:
        return f"{self.task_set.name}/{self.external_id}"

    def get_absolute_url(self) -> str:
        return reverse("evaluation:task_detail", args=[self.pk])


SEARCH_CONFIG = "english"


def transcript_texts():
    """The transcript's message texts as one JSON array (no roles, turns or keys, so searching for
    "user" or "content" does not match every episode)."""
    return models.Func(models.F("transcript"), models.Value("$[*].content"), function="jsonb_path_query_array",
                       output_field=models.JSONField())
class TaskVersion(models.Model):
    """One version of a task's gradable content, kept when a later edit or re-import replaces it."""
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)
    spec = models.JSONField(help_text="The whole spec as this version had it.")
    created_at = models.DateTimeField(default=timezone.now)
    class Meta:
        ordering = ["task", "number"]
        constraints = [models.UniqueConstraint(fields=["task", "number"], name="task_version_unique_number")]
    def __str__(self) -> str:
        return f"{self.task} v{self.number}"


class BenchmarkWorld(models.Model):
    """A public benchmark's initial database and agent policy (evaluation.environments.benchmark),
    stored once under the SHA-256 of its content and shared by every workspace's imported tasks:
    a task spec names it by that key (`world`), never by copy."""
    key = models.CharField(max_length=64, primary_key=True, help_text="SHA-256 of the database and policy.")
    benchmark = models.CharField(max_length=64, db_index=True)
    # JSON text rather than jsonb, which would reorder keys: the tools search rows in the benchmark's
    # order (the first user matching a name and zip) and --db-out writes them in it.
    database = models.TextField(help_text="The database as JSON, in the benchmark's own schema and order.")
    policy = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.benchmark} world {self.key[:12]}"


class Episode(models.Model):

    WORKSPACE_PATH = "task__task_set__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    class Status(models.TextChoices):
        COMPLETED = "completed", "completed"
        ERROR = "error", "infrastructure error"

    class EndedBy(models.TextChoices):
        STOP = "stop", "customer ended"
        TRANSFER = "transfer", "transferred to a human"
        MAX_TURNS = "max_turns", "turn limit"
        ERROR = "error", "error"

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="episodes")
    task_snapshot = models.JSONField(help_text="The task spec as it was when the episode ran.")
    seed = models.BigIntegerField()
    agent_backend = models.CharField(max_length=200)
    customer_backend = models.CharField(max_length=200)
    memory_kind = models.CharField(max_length=64, default=MemoryKind.NONE, help_text="A memory layer's name.")
    agent_config = models.JSONField(default=dict)
    customer_config = models.JSONField(default=dict)
    memory_config = models.JSONField(default=dict)
    max_turns = models.PositiveSmallIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, db_index=True)
    ended_by = models.CharField(max_length=16, choices=EndedBy.choices)
    success = models.BooleanField(db_index=True)
    reward = models.FloatField()
    reward_breakdown = models.JSONField(default=dict)
    reward_details = models.JSONField(default=dict, help_text="Missing look-ups and outputs, invented ids, hashes.")
    transcript = models.JSONField(default=list)
    memories = models.JSONField(default=list, help_text="Retrieved memories, one record per retrieval.")
    errors = models.JSONField(default=list, help_text="Diagnosed error kinds (wrong tool, wrong arguments, ...).")
    committed_errors = models.JSONField(default=list, help_text="Error kinds the scripted agent chose to make.")
    infra_error = models.TextField(blank=True)
    turns = models.PositiveSmallIntegerField()
    tool_calls = models.PositiveIntegerField(default=0)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    # The LLM calls made while it played carry the same id (memweb.llm.trace); empty for episodes
    # stored before calls were traced.
    trace_id = models.UUIDField(null=True, blank=True, unique=True)
    spans = models.JSONField(default=list, help_text="Each step's turn, kind (customer, memory, agent) and ms.")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # Full-text search over what was said (the episode list's transcript search); PostgreSQL keeps
    # it in step with the transcript, so no save path has to remember it.
    transcript_search = models.GeneratedField(
        expression=SearchVector(Cast(transcript_texts(), models.TextField()), config=SEARCH_CONFIG),
        output_field=SearchVectorField(), db_persist=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [GinIndex(fields=["transcript_search"], name="episode_transcript_search")]

    def __str__(self) -> str:
        return f"episode {self.pk} on {self.task.external_id}"

    def get_absolute_url(self) -> str:
        return reverse("evaluation:episode_detail", args=[self.pk])

    @property
    def agent_scripted(self) -> bool:
        # "scripted", or "scripted: <what it is>" where an environment's offline agent says more.
        return self.agent_backend == AgentBackend.SCRIPTED or self.agent_backend.startswith(f"{AgentBackend.SCRIPTED}:")

    @property
    def agent_uses_gold(self) -> bool:
        """An offline agent that reads the task's answer key (τ²-bench's gold-replay agent)."""
        return self.agent_scripted and USES_GOLD in self.agent_backend

    @property
    def customer_scripted(self) -> bool:
        return self.customer_backend.startswith("agenda")
