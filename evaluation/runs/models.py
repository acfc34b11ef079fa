"""Evaluation runs: trials x tasks of episodes, played by Celery workers (registered by evaluation/apps.py).

A run's rows are the unit of work: one RunEpisode per (run, trial, task), claimed with a
conditional update so a re-delivered message never plays it twice. A RunEpisode keeps the
verdict of its episode (success, reward, turns...) beside the link to the full Episode, so
metrics need no join and a run imported from elsewhere (no transcripts) charts the same way.
"""
from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import cached_property

from evaluation.configs import AgentBackend
from evaluation.feedback.models import CalibrationSetting
from evaluation.memory_layers.registry import NO_MEMORY, memory_layer_label, memory_layer_or_stand_in
from memweb.models import workspace_field
from memweb.scoping import AllWorkspacesManager, WorkspaceManager

__all__ = ["EvaluationMode", "EvaluationRun", "FeedbackCalibration", "FeedbackCurve", "FeedbackMemory",
           "RegradeScore", "ReviewGate", "RunEpisode", "RunPreset", "RunRegrade", "RunTaskPin", "SplitRule", "TaskSplit",
           "Trial"]

FeedbackCalibration = CalibrationSetting.CalibrateOn  # where a feedback run's action model takes p(S) from


class ReviewGate(models.TextChoices):
    AUTO = "auto", "auto-approve in-run memories"
    WAIT = "wait", "wait for reviewers"


class FeedbackMemory(models.TextChoices):
    """What a feedback run's trial-end Orbs are written from (MemoryBench feeds feedback into memory)."""
    ONPOLICY = "onpolicy", "on-policy: each trial's Orbs carry its users' feedback"
    NONE = "none", "feedback recorded only (Orbs from the plain trajectories)"


class RunPreset(models.TextChoices):
    """The papers' ablations, one choice each (evaluation.runs.services.spec.PRESETS sets their fields)."""

    MEMORB_K1 = "memorb_k1", "MemOrb with k = 1 (the paper's no-cross-user ablation)"
    MEMORB_STRUCTURED = "memorb_structured", "MemOrb with the complex structured reflection (the paper's ablation)"
    # The DMRM paper's ablations ("without DMRM" is a run without memory).
    DMRM_NO_TRANSFER = "dmrm_no_transfer", "DMRM without transfer: a fresh bank, no source memory"
    DMRM_N1 = "dmrm_n1", "DMRM with n = 1 (source memory off after 1 successful trajectory)"
    DMRM_N2 = "dmrm_n2", "DMRM with n = 2 (the paper's best)"
    DMRM_N3 = "dmrm_n3", "DMRM with n = 3"
    DMRM_TRAIN_TEST = "dmrm_train_test", "DMRM's train/test protocol: train tasks for the first trials, then held-out tasks"


class EvaluationMode(models.TextChoices):
    """What a run measures: within-task learning (the same tasks replayed) or transfer (held-out tasks)."""

    REPLAY = "replay", "replayed tasks: every trial plays every task, memory learns from all"
    HELD_OUT = "held_out", "held-out tasks: every trial plays both splits, memory learns from the train split only"
    TRAIN_TEST = "train_test", "train then test: the first trials play the train split, the rest the test split"


class SplitRule(models.TextChoices):
    """How a held-out run divides its tasks into a train and a test split."""

    FRACTION = "fraction", "a seeded fraction of the tasks, per domain"
    TASK_SET = "task_set", "the task set's own split labels"


class TaskSplit(models.TextChoices):
    TRAIN = "train", "train"
    TEST = "test", "test"


class EvaluationRun(models.Model):
    class Status(models.TextChoices):
        # A background job copies the bank the run starts from, then queues it (runs.services.launch).
        PREPARING = "preparing", "copying its memory bank"
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        WAITING_FOR_REVIEW = "waiting_for_review", "waiting for review"
        CANCELLED = "cancelled", "cancelled"
        COMPLETED = "completed", "completed"
        FAILED = "failed", "failed"

    class Executor(models.TextChoices):
        CELERY = "celery", "Celery workers"
        INLINE = "inline", "in-process (demo loader)"

    ACTIVE = (Status.PREPARING, Status.QUEUED, Status.RUNNING, Status.WAITING_FOR_REVIEW)

    workspace = workspace_field("runs")
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()
    name = models.CharField(max_length=200)
    # The task selection as asked for, and the tasks it resolved to at launch (fixed for the run).
    task_set = models.ForeignKey("evaluation.TaskSet", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="runs")
    task_pks = models.JSONField(default=list, blank=True, help_text="The tasks the selection resolved to.")
    # Runs stored before fingerprints existed (and runs imported from elsewhere) keep it empty:
    # unknown, rather than a guess from the tasks' content today.
    tasks_fingerprint = models.CharField(
        max_length=64, blank=True, help_text="Hash of the tasks' content at launch: runs scored against edited tasks "
                                             "are not compared.")
    # What the run was scored against, recorded at launch (evaluation.runs.services.pins); empty for
    # runs launched before pins existed and for imported runs: unknown, never guessed.
    pins = models.JSONField(default=dict, blank=True,
                            help_text="Agent and customer configuration, reward code and starting memory at launch.")
    reward_version = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="evaluation.shop.reward.REWARD_VERSION the run was scored with.")
    # A registered memory layer's name (evaluation.memory_layers.registry): no fixed choices, so an
    # installed package's layer is stored like a built-in one.
    memory_mode = models.CharField(max_length=64, default=NO_MEMORY, db_index=True)
    # The validated RunSpec it was launched with (services.spec.run_spec_stored), the parameters in
    # force: read it as `run_spec`. Lists filter and sort on the few settings kept as columns too.
    spec = models.JSONField(default=dict, blank=True, help_text="The run's settings: its RunSpec, as stored.")
    spec_version = models.PositiveSmallIntegerField(
        default=1, help_text="The shape of `spec` (evaluation.runs.services.spec.SPEC_VERSION when stored).")
    dmrm_config = models.JSONField(default=dict, blank=True,
                                   help_text="DMRM parameters of the run's bank; empty without DMRM.")
    bank = models.ForeignKey("orbs.MemoryBank", null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="evaluation_runs")
    bank_copied_from = models.CharField(max_length=100, blank=True)
    task_splits = models.JSONField(default=dict, blank=True,
                                   help_text="Held-out runs: task external id -> train or test, fixed at launch.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED, db_index=True)
    status_message = models.TextField(blank=True)
    executor = models.CharField(max_length=8, choices=Executor.choices, default=Executor.CELERY)
    episodes_total = models.PositiveIntegerField(default=0)
    episodes_finished = models.PositiveIntegerField(default=0, help_text="Done or errored.")
    episodes_error = models.PositiveIntegerField(default=0)
    successes = models.PositiveIntegerField(default=0)
    metrics = models.JSONField(null=True, blank=True, help_text="evaluation.metrics.run_metrics of finished trials.")
    metrics_trials = models.PositiveSmallIntegerField(default=0, help_text="Finished trials the metrics cover.")
    scripted = models.BooleanField(default=True, help_text="Produced by an offline (scripted) backend.")
    # An AgentBackend, or "external" for an imported run.
    agent_backend = models.CharField(max_length=32, default=AgentBackend.SCRIPTED, db_index=True)
    imported = models.BooleanField(default=False)
    imported_from = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="evaluation_runs")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    watch_until = models.DateTimeField(null=True, blank=True, help_text="When the next watchdog sweep is due.")

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("evaluation:run_detail", args=[self.pk])

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @cached_property
    def run_spec(self):
        """The run's settings as today's RunSpec (upgraded from its stored version, validated once per
        instance). Its name and memory mode are the columns', which lists show and filter on."""
        from evaluation.runs.services.spec import spec_read  # the spec module builds on this one

        stored = {**self.spec, "name": self.name or "run", "memory_mode": self.memory_mode}
        spec, self.spec_unreadable = spec_read(stored, self.spec_version)
        return spec

    spec_unreadable: list[str] = []  # settings of `spec` not valid, read as their defaults (run_spec)

    def refresh_from_db(self, *args, **kwargs):
        super().refresh_from_db(*args, **kwargs)
        self.__dict__.pop("run_spec", None)

    @property
    def memory_layer(self):
        """The run's memory layer (evaluation.memory_layers): everything memory-specific asks it."""
        return memory_layer_or_stand_in(self.memory_mode)

    def get_memory_mode_display(self) -> str:
        return memory_layer_label(self.memory_mode)

    @property
    def has_memory(self) -> bool:
        return self.memory_layer.remembers

    @property
    def memory_summary(self) -> list[str]:
        """The memory settings the run page shows after the layer's label."""
        return self.memory_layer.settings_summary(self)

    @property
    def memory_page(self) -> tuple[str, str] | None:
        """(text, url) of the page that shows the run's memory."""
        return self.memory_layer.memory_link(self)

    @property
    def memory_episode_partials(self) -> tuple[str, ...]:
        return self.memory_layer.episode_partials

    @property
    def agent_uses_gold(self) -> bool:
        """Its offline agent replays the tasks' gold answer: the scripted agent of an imported benchmark
        (labelled "gold-replay agent (uses the gold answer)" wherever the run's results show)."""
        return (self.agent_backend == AgentBackend.SCRIPTED and self.task_set is not None
                and bool(self.task_set.provenance.get("benchmark")))

    @property
    def reflects_with_answer_key(self) -> bool:
        """Its memories were reflected with the gold answer's diagnosis (labelled "oracle")."""
        return self.memory_layer.reflects_with_answer_key(self)

    @property
    def measures_memory_effects(self) -> bool:
        """Launched in the effect-measurement mode: some retrieved memories were withheld at random."""
        return self.run_spec.withhold_probability > 0

    @property
    def held_out(self) -> bool:
        """Memory learns from the train split only and success is measured on the test split."""
        return self.run_spec.evaluation_mode != EvaluationMode.REPLAY

    def split_counts(self) -> dict[str, int]:
        """Tasks per split of a held-out run."""
        values = list(self.task_splits.values())
        return {split: values.count(split) for split in TaskSplit.values}

    def split_trials(self, split: str, trials: int) -> list[int]:
        """The trial numbers, up to `trials`, in which the run played `split`'s tasks."""
        numbers = range(1, trials + 1)
        if self.run_spec.evaluation_mode != EvaluationMode.TRAIN_TEST:
            return list(numbers)
        train_trials = self.run_spec.train_trials_resolved()
        if split == TaskSplit.TRAIN:
            return [n for n in numbers if n <= train_trials]
        return [n for n in numbers if n > train_trials]

    @property
    def progress_percent(self) -> int:
        return round(100 * self.episodes_finished / self.episodes_total) if self.episodes_total else 0

    @property
    def success_percent(self) -> int | None:
        """Successes among the finished episodes that got a verdict (infrastructure errors left out)."""
        judged = self.episodes_finished - self.episodes_error
        return round(100 * self.successes / judged) if judged else None

    @property
    def orb_label(self) -> str:
        """Prefix of the source label of every Orb this run writes (the review queue shows it)."""
        return f"evaluation run #{self.pk}"


class Trial(models.Model):

    WORKSPACE_PATH = "run__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        RUNNING = "running", "running"
        REFLECTING = "reflecting", "writing memories"
        DONE = "done", "done"
        CANCELLED = "cancelled", "cancelled"

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="trial_rows")
    number = models.PositiveSmallIntegerField()
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    episodes_total = models.PositiveIntegerField(default=0)
    episodes_finished = models.PositiveIntegerField(default=0)
    episodes_error = models.PositiveIntegerField(default=0)
    successes = models.PositiveIntegerField(default=0)
    orbs_written = models.PositiveIntegerField(default=0)
    experiences_written = models.PositiveIntegerField(default=0, help_text="DMRM steps written to the target memory.")
    claim_token = models.UUIDField(null=True, blank=True)
    claimed_by = models.CharField(max_length=255, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "number"]
        constraints = [models.UniqueConstraint(fields=["run", "number"], name="trial_unique_in_run")]

    def __str__(self) -> str:
        return f"{self.run} · trial {self.number}"


class RunEpisode(models.Model):

    WORKSPACE_PATH = "run__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        RUNNING = "running", "running"
        DONE = "done", "done"
        ERROR = "error", "infrastructure error"
        CANCELLED = "cancelled", "cancelled"

    UNFINISHED = (Status.PENDING, Status.RUNNING)

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="run_episodes")
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="run_episodes")
    task = models.ForeignKey("evaluation.Task", null=True, blank=True, on_delete=models.PROTECT,
                             related_name="run_episodes", help_text="Empty for an imported run.")
    task_key = models.CharField(max_length=100, help_text="The task's external id.")
    split = models.CharField(max_length=8, blank=True, default="", choices=TaskSplit.choices,
                             help_text="A held-out run's train or test split; empty for a replay run.")
    seed = models.BigIntegerField(default=0)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING, db_index=True)
    episode = models.OneToOneField("evaluation.Episode", null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="run_episode")
    orb = models.ForeignKey("orbs.Orb", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    success = models.BooleanField(null=True, blank=True)
    reward = models.FloatField(null=True, blank=True)
    turns = models.PositiveSmallIntegerField(null=True, blank=True)
    tokens = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    imported_feedback = models.JSONField(
        null=True, blank=True, help_text="An imported episode's simulated user feedback, as the run file gave it "
                                         "(a played episode's is on its Episode).")
    attempts = models.PositiveSmallIntegerField(default=0)
    claim_token = models.UUIDField(null=True, blank=True)
    claimed_by = models.CharField(max_length=255, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True, help_text="When a message for it was last sent.")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["trial__number", "task_key"]
        constraints = [
            models.UniqueConstraint(fields=["run", "trial", "task"], name="run_episode_unique_task"),
            models.UniqueConstraint(fields=["run", "trial", "task_key"], name="run_episode_unique_key"),
        ]
        indexes = [models.Index(fields=["trial", "status"], name="run_episode_trial_status")]

    def __str__(self) -> str:
        return f"{self.run} · trial {self.trial.number} · {self.task_key}"

    @property
    def cell_state(self) -> str:
        """success / failure / error / pending / running: a heatmap cell's state."""
        if self.status == self.Status.DONE:
            return "success" if self.success else "failure"
        return self.status


class RunTaskPin(models.Model):
    """The version of one task a run was scored against, and the version its latest re-grade used."""

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="task_pins")
    task = models.ForeignKey("evaluation.Task", on_delete=models.PROTECT, related_name="run_pins")
    version = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)
    regraded_version = models.PositiveIntegerField(null=True, blank=True,
                                                   help_text="The version the run's latest re-grade scored against.")

    class Meta:
        ordering = ["run", "task"]
        constraints = [models.UniqueConstraint(fields=["run", "task"], name="run_task_pin_unique")]

    def __str__(self) -> str:
        return f"{self.run} · task #{self.task_id} v{self.version}"


class RunRegrade(models.Model):
    """A finished re-grade: the run's stored trajectories scored again against the gold of its tasks'
    versions then (the original verdicts stay on RunEpisode). Written whole by the re-grade job."""

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="regrades")
    task_versions = models.JSONField(default=dict, help_text="Task external id -> the version scored against.")
    reward_version = models.PositiveSmallIntegerField()
    episodes = models.PositiveIntegerField(default=0, help_text="Episodes scored again.")
    changed = models.PositiveIntegerField(default=0, help_text="Episodes whose success verdict changed.")
    metrics = models.JSONField(null=True, blank=True, help_text="evaluation.metrics.run_metrics of the new verdicts.")
    metrics_trials = models.PositiveSmallIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"re-grade #{self.pk} of {self.run}"


class RegradeScore(models.Model):
    """One episode's new verdict in a re-grade, beside its original on the RunEpisode."""

    regrade = models.ForeignKey(RunRegrade, on_delete=models.CASCADE, related_name="scores")
    run_episode = models.ForeignKey(RunEpisode, on_delete=models.CASCADE, related_name="+")
    success = models.BooleanField()
    reward = models.FloatField()
    reward_breakdown = models.JSONField(default=dict)

    class Meta:
        ordering = ["regrade", "run_episode"]
        constraints = [models.UniqueConstraint(fields=["regrade", "run_episode"], name="regrade_score_unique")]


class FeedbackCurve(models.Model):
    """Off-policy feedback (MemoryBench): a finished feedback run's logs go into a fresh bank in
    batches, and the run's tasks are played against the bank after each batch; one point per
    number of batches written, from 0 (the empty bank) to all of them."""

    WORKSPACE_PATH = "run__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        COMPLETED = "completed", "completed"
        FAILED = "failed", "failed"

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="feedback_curves")
    bank = models.ForeignKey("orbs.MemoryBank", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    batch_size = models.PositiveIntegerField(help_text="Feedback logs (episodes) written per batch.")
    batches = models.PositiveSmallIntegerField()
    feedback_episode_ids = models.JSONField(default=list, help_text="The logs, in the order they are written.")
    test_task_pks = models.JSONField(default=list, help_text="Tasks played after each batch.")
    seed = models.BigIntegerField(default=0, help_text="Every point plays its tasks with the same seeds.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    status_message = models.TextField(blank=True)
    steps_started = models.PositiveSmallIntegerField(default=0, help_text="Points claimed by a worker.")
    points = models.JSONField(default=list, help_text="One per point: batches, orbs, tasks, successes.")
    scripted = models.BooleanField(default=True, help_text="Played by an offline (scripted) backend.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"learning curve #{self.pk} of {self.run}"

    def get_absolute_url(self) -> str:
        return reverse("evaluation:feedback_curve", args=[self.pk])

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def steps(self) -> int:
        """Points to measure: before any batch, then after each."""
        return self.batches + 1

    @property
    def progress_percent(self) -> int:
        return round(100 * len(self.points) / self.steps)
