"""Models of the DMRM experience memory (registered with the orbs app by OrbsConfig.import_models).

An Experience row is one entry of the Q-table: a state (goal g, observation o),
an action a, the reward and next observation seen, and its Q-value. The target
memory M_t of a bank grows as an agent acts; a source memory M_s is a named,
read-only set built from finished episodes of another domain.
"""
from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone
from pgvector.django import VectorField

from memweb.models import AppendOnly
from memweb.scoping import AllWorkspacesManager, WorkspaceManager
from memweb.vectors import vector_hnsw_indexes, vector_model_constraint

__all__ = [
    "DMRMRetrievalLog", "DMRMSettings", "Experience", "ExperienceEvent", "ExperienceStep", "ExperienceTrajectory",
    "SourceMemory",
]


class DMRMSettings(models.Model):
    """Per-bank learning and retrieval parameters of DMRM."""

    class Suppression(models.TextChoices):
        DISABLE = "disable", "disable the source memory"
        DOWN_WEIGHT = "down_weight", "down-weight source scores"

    class StateMatch(models.TextChoices):
        EXACT = "exact", "exact text (after normalisation)"
        SIMILAR = "similar", "embedding cosine above the state similarity"

    bank = models.OneToOneField("orbs.MemoryBank", on_delete=models.CASCADE, related_name="dmrm_settings")
    alpha = models.FloatField(default=0.5, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
                              help_text="Learning rate α of the Q update.")
    gamma = models.FloatField(default=0.9, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
                              help_text="Discount γ of the next state's best Q-value.")
    c_max = models.PositiveIntegerField(default=512, validators=[MinValueValidator(16), MaxValueValidator(8000)],
                                        help_text="Token budget C_max: Σ len(m_j) + len(o, g) never exceeds it.")
    n_success = models.PositiveSmallIntegerField(
        default=2, validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Suppress the source memory once the target memory holds this many successful trajectories.",
    )
    suppression_mode = models.CharField(max_length=16, choices=Suppression.choices, default=Suppression.DISABLE)
    source_weight = models.FloatField(default=0.5, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
                                      help_text="Down-weight mode: source scores are multiplied by this.")
    scan_limit = models.PositiveSmallIntegerField(
        default=50, validators=[MinValueValidator(1), MaxValueValidator(500)],
        help_text="Nearest entries read per retrieval before the budget rule picks from them.",
    )
    # Not in the paper (it ranks every entry and lets C_max alone decide): without a floor, a small
    # memory puts advice from unrelated tasks in the prompt. 0 gives the paper's behaviour.
    min_similarity = models.FloatField(
        default=0.3, validators=[MinValueValidator(-1.0), MaxValueValidator(1.0)],
        help_text="Entries whose cosine similarity to (o, g) is below this are never put in the prompt.")
    state_match = models.CharField(
        max_length=8, choices=StateMatch.choices, default=StateMatch.EXACT,
        help_text="How the Q update finds the successor state o' whose best Q it bootstraps from.")
    state_similarity = models.FloatField(
        default=0.9, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Similar state match: entries whose (o', g) cosine reaches this count as the successor state.")
    # The Orbs gate for DMRM: what an API key writes may be customer text or a failed run's steps,
    # so it waits for a reviewer, as a key's lessons do. Evaluation runs write their own target
    # memory in-process and are not gated (docs/DMRM.md says why).
    review_api_writes = models.BooleanField(
        default=True, help_text="Experiences written through the API are served only once a reviewer approves them.")

    def __str__(self) -> str:
        return f"DMRM settings of {self.bank}"


class SourceMemory(models.Model):
    """A named, read-only M_s: the experiences a builder kept from finished episodes."""

    WORKSPACE_PATH = "bank__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    bank = models.ForeignKey("orbs.MemoryBank", on_delete=models.CASCADE, related_name="source_memories")
    name = models.CharField(max_length=100)
    source_domain = models.CharField(max_length=64)
    min_reward = models.FloatField()
    min_q = models.FloatField()
    gamma = models.FloatField()
    episodes_read = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(default=timezone.now)
    # The build is the review: the operator chose the episodes and thresholds, so the whole set is
    # approved at once (one decision, recorded here), and single entries can still be rejected.
    approved_at = models.DateTimeField(null=True, blank=True)
    approval_note = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["bank", "name"], name="source_memory_unique_name")]

    def __str__(self) -> str:
        return self.name


class Experience(models.Model):

    WORKSPACE_PATH = "bank__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    class Memory(models.TextChoices):
        SOURCE = "source", "source (M_s)"
        TARGET = "target", "target (M_t)"

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        APPROVED = "approved", "approved"
        REJECTED = "rejected", "rejected"
        DELETED = "deleted", "deleted"

    bank = models.ForeignKey("orbs.MemoryBank", on_delete=models.CASCADE, related_name="experiences")
    memory = models.CharField(max_length=8, choices=Memory.choices, db_index=True)
    source_memory = models.ForeignKey(SourceMemory, null=True, blank=True, on_delete=models.CASCADE,
                                      related_name="experiences")
    goal = models.TextField()
    observation = models.TextField()
    action = models.TextField()
    reward = models.FloatField()
    next_observation = models.TextField(blank=True)
    state_key = models.CharField(max_length=64, help_text="SHA-256 of the normalised (goal, observation).")
    next_state_key = models.CharField(max_length=64)
    action_key = models.CharField(max_length=64, help_text="SHA-256 of the normalised action.")
    q_value = models.FloatField(default=0.0)
    visits = models.PositiveIntegerField(default=0)
    bootstraps = models.PositiveIntegerField(
        default=0, help_text="Updates of this entry whose target included a successor state's best Q.")
    trajectory_id = models.CharField(max_length=200)
    step = models.PositiveIntegerField()
    success = models.BooleanField(null=True, blank=True, help_text="How the trajectory that first wrote it ended.")
    domain = models.CharField(max_length=64, blank=True, db_index=True)
    task_ref = models.CharField(max_length=200, blank=True, db_index=True)
    run_ref = models.CharField(max_length=200, blank=True)
    episode_ref = models.CharField(max_length=200, blank=True)
    vector = VectorField()  # of its model's dimension (memweb/vectors.py)
    embedding_model = models.CharField(max_length=100)
    token_length = models.PositiveIntegerField(help_text="Tokens of the entry as rendered, counted offline.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_note = models.TextField(blank=True)
    version = models.PositiveIntegerField(default=1)
    flagged_at = models.DateTimeField(null=True, blank=True, db_index=True,
                                      help_text="Put before a reviewer because withholding measured it doing harm.")
    flag_note = models.TextField(blank=True)
    needs_review = models.BooleanField(
        default=False, help_text="Written through the API behind the bank's review gate: served once approved.")
    customer_key = models.CharField(max_length=200, blank=True, db_index=True,
                                    help_text="The customer whose trajectory first wrote it (erasure finds it by this).")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # The target memory's Q-table has one entry per (state, action): parallel
            # episodes meeting the same pair update the same row.
            models.UniqueConstraint(fields=["bank", "state_key", "action_key"], condition=models.Q(memory="target"),
                                    name="experience_target_q_entry"),
            vector_model_constraint("experience"),
        ]
        indexes = [
            models.Index(fields=["bank", "memory", "state_key"], name="experience_state_idx"),
            *vector_hnsw_indexes("experience", m=16, ef_construction=64),
        ]

    def __str__(self) -> str:
        return f"{self.memory} experience {self.pk}: {self.action[:40]}"


class ExperienceEvent(AppendOnly):
    """Append-only audit of an experience's deletion and restoration: who, when, why."""

    class Action(models.TextChoices):
        DELETED = "deleted", "deleted"
        RESTORED = "restored", "restored"

    experience = models.ForeignKey(Experience, on_delete=models.CASCADE, related_name="events")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    actor_name = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=16, choices=Action.choices)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    note = models.TextField(blank=True)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor_name or 'system'}"


class ExperienceTrajectory(models.Model):
    """A trajectory written to the target memory, and how it ended (drives source suppression)."""

    WORKSPACE_PATH = "bank__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    bank = models.ForeignKey("orbs.MemoryBank", on_delete=models.CASCADE, related_name="experience_trajectories")
    trajectory_id = models.CharField(max_length=200)
    domain = models.CharField(max_length=64, blank=True, default="",
                              help_text="The task's domain: source suppression counts successes per domain.")
    steps = models.PositiveIntegerField(default=0)
    success = models.BooleanField(null=True, blank=True)
    customer_key = models.CharField(max_length=200, blank=True, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["bank", "trajectory_id"], name="experience_trajectory_unique")]


class ExperienceStep(models.Model):
    """A (trajectory, step) already applied to the target memory: a retried write of the same step
    changes nothing (no second visit, no second Q update)."""

    bank = models.ForeignKey("orbs.MemoryBank", on_delete=models.CASCADE, related_name="experience_steps")
    trajectory_id = models.CharField(max_length=200)
    step = models.PositiveIntegerField()
    experience = models.ForeignKey(Experience, null=True, on_delete=models.CASCADE, related_name="applied_steps")
    # A step of one customer may update an entry another customer's step wrote first (same state and
    # action): erasing either removes the entry, whose Q-value learnt from both.
    customer_key = models.CharField(max_length=200, blank=True, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["bank", "trajectory_id", "step"], name="experience_step_unique")]


class DMRMRetrievalLog(models.Model):
    """One DMRM retrieval: the query, whether M_s was suppressed, the budget, and every candidate's fate."""

    WORKSPACE_PATH = "bank__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    bank = models.ForeignKey("orbs.MemoryBank", on_delete=models.CASCADE, related_name="dmrm_retrievals")
    goal = models.TextField()
    observation = models.TextField()
    suppressed = models.BooleanField()
    suppression_mode = models.CharField(max_length=16)
    successful_trajectories = models.PositiveIntegerField()
    c_max = models.PositiveIntegerField()
    min_similarity = models.FloatField(default=0.0)
    budget_used = models.PositiveIntegerField()
    hits = models.JSONField(default=list)
    prompt_block = models.TextField(blank=True)
    embed_ms = models.FloatField(default=0)
    search_ms = models.FloatField(default=0)
    client = models.CharField(max_length=200, blank=True)
    customer_key = models.CharField(max_length=200, blank=True, db_index=True)
    # How the episode that retrieved ended (runs record it when the episode is stored): with the
    # withheld hits, what each experience is worth is measured from these.
    episode_ref = models.CharField(max_length=200, blank=True, db_index=True)
    success = models.BooleanField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"DMRM retrieval {self.pk}"

    @property
    def included_count(self) -> int:
        return sum(1 for hit in self.hits if hit.get("included"))

    @property
    def withheld_count(self) -> int:
        return sum(1 for hit in self.hits if hit.get("withheld"))
