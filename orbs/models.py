"""Memory banks, Orbs (the MemOrb paper's reflection memories), their review
audit trail, and the log of every retrieval an agent made."""
import hashlib
import json

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex, OpClass
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import connection, models
from django.db.models.functions import Upper
from django.utils import timezone
from pgvector.django import VectorField

from memweb.embeddings import DIMENSIONS, MODELS
from memweb.llm.backends import TextBackend
from memweb.models import AppendOnly, workspace_field
from memweb.scoping import AllWorkspacesManager, WorkspaceManager, workspace_unscoped
from memweb.vectors import vector_hnsw_indexes, vector_model_constraint
from orbs.budget import DEFAULT_K, DEFAULT_PROMPT_TOKEN_BUDGET, MAX_PROMPT_TOKEN_BUDGET

# Chosen with bench/orbs_retrieval.py (docs/PERFORMANCE.md): at 1M Orbs, m=16 / ef_construction=64
# reached only 0.85 recall@5 at ef_search=100; these reach 0.96.
HNSW_M = 24
HNSW_EF_CONSTRUCTION = 128
HNSW_EF_SEARCH = 100
NEGATIVE_EMOTIONS = ("angry", "frustrated", "anxious")


PENDING_FIRST = models.Case(
    models.When(status="pending", then=models.Value(0)), default=models.Value(1), output_field=models.IntegerField()
)


def content_hash_of(*, obs: str, emotion: str, outcome: str, customer_key: str = "") -> str:
    """The paper's Orb id: SHA-256(obs ‖ emotion ‖ outcome), as hex. An Orb of a per-customer bank
    also hashes its customer (after a unit separator, so no outcome text can pose as a customer),
    which makes two customers' identical episodes two Orbs."""
    customer = f"\x1f{customer_key}" if customer_key else ""
    return hashlib.sha256(f"{obs}{emotion}{outcome}{customer}".encode()).hexdigest()


class Source(models.TextChoices):
    EPISODE = "episode", "episode"
    API = "api", "API client"
    REMEMBERED = "remembered", "remembered (a lesson given as text)"


class MemoryBank(models.Model):
    """A namespace of Orbs with its own retrieval and auto-approve policy."""

    class AutoApprove(models.TextChoices):
        NEVER = "never", "never: every Orb waits for a reviewer"
        ALWAYS = "always", "always"
        BY_RULE = "by_rule", "by rule: reward at least the threshold and the customer not upset"

    class CustomerScope(models.TextChoices):
        SHARED = "shared", "shared: every customer's Orbs serve every customer"
        PER_CUSTOMER = "per_customer", "per customer: an Orb belongs to its customer"

    # Names and slugs stay unique across workspaces: agents and run settings name a bank by its slug.
    workspace = workspace_field("banks")
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    def validate_unique(self, exclude=None):
        with workspace_unscoped():  # the name is unique across the server, not per workspace
            super().validate_unique(exclude)
    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    retrieval_k = models.PositiveSmallIntegerField(default=DEFAULT_K, validators=[MinValueValidator(1), MaxValueValidator(50)])
    approved_only = models.BooleanField(default=True, help_text="Agents retrieve only approved Orbs.")
    min_score = models.FloatField(
        default=0.0, validators=[MinValueValidator(-1.0), MaxValueValidator(1.0)],
        help_text="Hits with a lower cosine similarity are dropped.",
    )
    near_duplicate_threshold = models.FloatField(
        default=0.95, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="A new Orb at least this similar to an existing one is flagged for merging.",
    )
    auto_approve = models.CharField(max_length=16, choices=AutoApprove.choices, default=AutoApprove.NEVER)
    auto_approve_min_reward = models.FloatField(
        default=1.0,
        help_text="By rule: approve when the episode's reward reaches this and the emotion is not negative.",
    )
    prompt_token_budget = models.PositiveIntegerField(
        default=DEFAULT_PROMPT_TOKEN_BUDGET, validators=[MinValueValidator(50), MaxValueValidator(MAX_PROMPT_TOKEN_BUDGET)],
        help_text="Upper bound on the tokens of the prompt block returned to agents; the default holds k Orbs of the "
                  "longest reflection the reflector writes.",
    )
    customer_scope = models.CharField(
        max_length=16, choices=CustomerScope.choices, default=CustomerScope.SHARED,
        help_text="Per customer: identical episodes of two customers are two Orbs, and a retrieval names its customer.",
    )
    cross_customer_retrieval = models.BooleanField(
        default=False,
        help_text="Per-customer banks only: a retrieval without a customer reads every customer's Orbs (logged).",
    )
    embedding_model = models.CharField(
        max_length=100, choices=[(name, name) for name in MODELS],
        help_text="Fixed when the bank is created: it fixes the dimension of every vector the bank holds.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    archived_at = models.DateTimeField(
        null=True, blank=True, db_index=True,
        help_text="Deleted (archived): hidden from lists, refuses new memories and retrievals, its pages still open.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def embedding_dimension(self) -> int:
        return DIMENSIONS[self.embedding_model]

    @property
    def is_archived(self) -> bool:
        return self.archived_at is not None

    @property
    def is_per_customer(self) -> bool:
        return self.customer_scope == self.CustomerScope.PER_CUSTOMER

    def orb_hash(self, *, obs: str, emotion: str, outcome: str, customer_key: str) -> str:
        """The id of an Orb in this bank: the paper's hash, with the customer in a per-customer bank."""
        scoped_key = customer_key if self.is_per_customer else ""
        return content_hash_of(obs=obs, emotion=emotion, outcome=outcome, customer_key=scoped_key)

    def clean(self):
        super().clean()
        if self.cross_customer_retrieval and not self.is_per_customer:
            raise ValidationError({"cross_customer_retrieval": "applies to per-customer banks only; a shared bank "
                                                               "always reads across customers"})
        if self.pk is None:
            return
        stored = MemoryBank.objects.filter(pk=self.pk).values("embedding_model", "customer_scope").first()
        if stored and stored["embedding_model"] != self.embedding_model:
            # Its vectors would have to be recomputed with the new model; memweb does not offer that.
            raise ValidationError({"embedding_model": f"fixed at {stored['embedding_model']} when the bank was "
                                                      "created; create a new bank for another embedding model"})
        if stored and stored["customer_scope"] != self.customer_scope and self.orbs.exists():
            # Its Orbs' ids (and their duplicates) were decided under the stored scope.
            raise ValidationError({"customer_scope": f"fixed at {stored['customer_scope']} once the bank holds "
                                                     "Orbs; create a new bank for another scope"})

    def approves_automatically(self, *, reward: float | None, emotion: str) -> bool:
        """`reward` None (a remembered lesson has none): the rule cannot judge it, a reviewer does."""
        if self.auto_approve == self.AutoApprove.ALWAYS:
            return True
        if self.auto_approve == self.AutoApprove.BY_RULE:
            return reward is not None and reward >= self.auto_approve_min_reward and emotion not in NEGATIVE_EMOTIONS
        return False


class EpisodeRecord(models.Model):
    """A finished episode handed to memweb: the stored trajectory (the Orb's
    provenance and transcript) and the state of its reflection work."""

    WORKSPACE_PATH = "bank__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"

    bank = models.ForeignKey(MemoryBank, on_delete=models.CASCADE, related_name="episodes")
    trajectory = models.JSONField()
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.EPISODE)
    source_label = models.CharField(max_length=200, blank=True)
    episode_ref = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    orb = models.ForeignKey("Orb", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_orb = models.BooleanField(default=False)
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=255, blank=True,
                                  help_text="The worker process reflecting it (memweb.services.worker_claimant).")
    finished_at = models.DateTimeField(null=True, blank=True)
    message_sent_at = models.DateTimeField(
        null=True, blank=True,
        help_text="When its reflection task was last handed to the broker (orbs.services.ingest): an "
                  "episode left waiting without a recent one is sent again by the worker beat.")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"episode {self.pk} ({self.status})"

    @property
    def success(self) -> bool | None:
        return self.trajectory.get("success")

    @property
    def reward(self) -> float | None:
        return self.trajectory.get("reward")


class Orb(models.Model):
    """⟨id, obs, emotion, outcome, context, timestamp⟩ plus review state and its vector."""

    WORKSPACE_PATH = "bank__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        APPROVED = "approved", "approved"
        REJECTED = "rejected", "rejected"
        SUPERSEDED = "superseded", "superseded"
        DELETED = "deleted", "deleted"

    Source = Source

    bank = models.ForeignKey(MemoryBank, on_delete=models.CASCADE, related_name="orbs")
    content_hash = models.CharField(max_length=64)
    obs = models.TextField()
    emotion = models.CharField(max_length=32, db_index=True)
    outcome = models.TextField()
    context = models.JSONField(default=dict)
    timestamp = models.DateTimeField(default=timezone.now)
    customer_key = models.CharField(max_length=200, blank=True, db_index=True)
    domain = models.CharField(max_length=64, blank=True, db_index=True)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.EPISODE)
    source_label = models.CharField(max_length=200, blank=True, db_index=True)
    episode_ref = models.CharField(max_length=200, blank=True)
    episode = models.ForeignKey(EpisodeRecord, null=True, blank=True, on_delete=models.SET_NULL, related_name="orbs")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    supersedes = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="revisions"
    )
    # The stable identity: every revision of an Orb points at its first revision, whose id is the
    # Orb's id for clients (orbs/services/identity.py); `revision` counts 1, 2, … RESTRICT: a first
    # revision (its own lineage) is deleted only together with its Orb's later revisions, or its bank.
    lineage = models.ForeignKey("self", on_delete=models.RESTRICT, related_name="lineage_revisions",
                                help_text="The first revision: its id is the Orb's stable id.")
    revision = models.PositiveIntegerField(default=1, help_text="1 for the Orb as created, then one per edit.")
    near_duplicate_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="near_duplicates"
    )
    near_duplicate_score = models.FloatField(null=True, blank=True)
    merged_into = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="merged")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_note = models.TextField(blank=True)
    vector = VectorField()  # of its model's dimension (memweb/vectors.py)
    embedding_model = models.CharField(max_length=100)
    emotion_backend = models.CharField(max_length=200, default=TextBackend.SCRIPTED)
    reflector_backend = models.CharField(max_length=200, default=TextBackend.SCRIPTED)
    backend_error = models.TextField(blank=True, help_text="Why the LLM backend was not used, when it failed.")
    flagged_at = models.DateTimeField(null=True, blank=True, db_index=True,
                                      help_text="When its measured effect flagged it for a reviewer (never deleted).")
    flag_note = models.TextField(blank=True)
    times_retrieved = models.PositiveIntegerField(default=0)
    last_retrieved_at = models.DateTimeField(null=True, blank=True)
    version = models.PositiveIntegerField(default=1, help_text="Bumped by every review action (optimistic locking).")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["bank", "content_hash"], name="orb_unique_hash_per_bank"),
                       models.UniqueConstraint(fields=["lineage", "revision"], name="orb_unique_revision"),
                       vector_model_constraint("orb")]
        indexes = [
            models.Index(fields=["bank", "status", "created_at"], name="orb_queue_idx"),
            # The review queue's order (pending first, then oldest first), so a page is read, not sorted.
            models.Index(PENDING_FIRST, "created_at", "id", name="orb_pending_first_idx"),
            # A bank's figures (orbs.services.banks.bank_stats) by an index-only scan, rows unread.
            models.Index(fields=["bank", "status", "emotion", "domain"], include=["reflector_backend", "near_duplicate_of"],
                         name="orb_bank_stats_idx"),
            *vector_hnsw_indexes("orb", m=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION),
            # Retrieval filters on context (orbs.context_filter) match with `context @@ jsonpath`;
            # jsonb_path_ops answers that operator's equalities and is smaller than the default class.
            GinIndex(OpClass("context", name="jsonb_path_ops"), name="orb_context_gin_idx"),
            # The review queue's text search is `icontains` (UPPER(column) LIKE '%words%'), which only a
            # trigram index on the same expression answers without reading every Orb (pg_trgm).
            GinIndex(OpClass(Upper("obs"), name="gin_trgm_ops"), name="orb_obs_trgm_idx"),
            GinIndex(OpClass(Upper("outcome"), name="gin_trgm_ops"), name="orb_outcome_trgm_idx"),
            # Its third alternative, a hash prefix (LIKE 'abc%'): without an index for it the planner
            # could not combine the three, and would read every Orb for all of them.
            models.Index(OpClass("content_hash", name="varchar_pattern_ops"), name="orb_hash_prefix_idx"),
        ]

    def __str__(self) -> str:
        return f"Orb {self.short_hash} ({self.status})"

    def save(self, *args, **kwargs):
        if self.lineage_id is None:
            # A first revision is its own lineage: its id is drawn before the INSERT so that the
            # row is written whole, with no moment in which it lacks its stable id.
            if self.pk is None:
                self.pk = _next_orb_id()
            self.lineage_id = self.pk
        super().save(*args, **kwargs)

    @property
    def stable_id(self) -> int:
        """The id clients hold: the same for every revision of this Orb."""
        return self.lineage_id

    @property
    def short_hash(self) -> str:
        return self.content_hash[:12]

    @property
    def document(self) -> str:
        return orb_document(obs=self.obs, emotion=self.emotion, outcome=self.outcome, context=self.context)

    @property
    def embedding_dimension(self) -> int:
        return DIMENSIONS[self.embedding_model]

    @property
    def is_scripted(self) -> bool:
        return TextBackend.is_scripted(self.reflector_backend) or TextBackend.is_scripted(self.emotion_backend)

    @property
    def reward(self):
        return self.context.get("reward") if isinstance(self.context, dict) else None


def _next_orb_id() -> int:
    return orb_ids_draw(1)[0]


def orb_ids_draw(count: int) -> list[int]:
    """`count` fresh Orb ids from the table's sequence, for Orbs written whole by a bulk insert."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                       [Orb._meta.db_table, count])
        return [row[0] for row in cursor.fetchall()]


def orb_document(*, obs: str, emotion: str, outcome: str, context: dict) -> str:
    """The embedded text: obs ⊕ emotion ⊕ outcome ⊕ str(context); keys sorted so
    the same context always gives the same vector."""
    return "\n".join([obs, emotion, outcome, json.dumps(context, sort_keys=True, ensure_ascii=False)])


class ReviewEvent(AppendOnly):
    """Append-only audit of every decision and edit on an Orb."""

    WORKSPACE_PATH = "orb__bank__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    class Action(models.TextChoices):
        CREATED = "created", "created"
        AUTO_APPROVED = "auto_approved", "auto-approved"
        APPROVED = "approved", "approved"
        REJECTED = "rejected", "rejected"
        EDITED = "edited", "edited (new revision)"
        SUPERSEDED = "superseded", "superseded"
        MERGED = "merged", "merged"
        FLAGGED = "flagged", "flagged for review"
        DELETED = "deleted", "deleted"
        RESTORED = "restored", "restored"
        MERGE_UNDONE = "merge_undone", "merge undone"

    orb = models.ForeignKey(Orb, on_delete=models.CASCADE, related_name="events")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    actor_name = models.CharField(max_length=150, blank=True, help_text="Kept when the account is gone or imported.")
    action = models.CharField(max_length=16, choices=Action.choices)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    note = models.TextField(blank=True)
    at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor_name or 'system'}"


class RetrievalLog(models.Model):
    """One retrieval: what was asked, how it was rewritten, what came back, how long each stage took."""

    WORKSPACE_PATH = "bank__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    bank = models.ForeignKey(MemoryBank, on_delete=models.CASCADE, related_name="retrievals")
    query = models.TextField()
    context = models.JSONField(default=dict, blank=True)
    rewritten_query = models.TextField()
    rewriter_backend = models.CharField(max_length=200, default=TextBackend.SCRIPTED)
    k = models.PositiveSmallIntegerField()
    filters = models.JSONField(default=dict, blank=True)
    hits = models.JSONField(default=list, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    rewrite_ms = models.FloatField(default=0)
    embed_ms = models.FloatField(default=0)
    search_ms = models.FloatField(default=0)
    client = models.CharField(max_length=200, blank=True)
    outcome_success = models.BooleanField(null=True, blank=True, help_text="How the episode that used it ended.")
    outcome_reward = models.FloatField(null=True, blank=True)
    outcome_episode_ref = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"retrieval {self.pk} ({len(self.hits)} hits)"


class RetrievalHit(models.Model):
    """The through rows that let an Orb list every retrieval that returned it."""

    retrieval = models.ForeignKey(RetrievalLog, on_delete=models.CASCADE, related_name="hit_rows")
    orb = models.ForeignKey(Orb, on_delete=models.CASCADE, related_name="retrieval_hits")
    rank = models.PositiveSmallIntegerField()
    score = models.FloatField()
    withheld = models.BooleanField(default=False, help_text="Kept out of the prompt by randomised withholding.")
    injected = models.BooleanField(null=True, help_text="In the prompt block (false: withheld or cut by the token "
                                                        "budget; empty: logged before this was recorded).")

    class Meta:
        ordering = ["-retrieval__created_at", "rank"]
        constraints = [models.UniqueConstraint(fields=["retrieval", "orb"], name="retrieval_hit_unique")]


class BankEvent(AppendOnly):
    """Append-only audit of what was done to a bank as a whole: archived, restored, a customer's
    data erased. An erasure keeps only counts and a hash of the customer key, never the content."""

    class Action(models.TextChoices):
        ARCHIVED = "archived", "archived (deleted)"
        RESTORED = "restored", "restored"
        CUSTOMER_ERASED = "customer_erased", "customer's data erased"

    # SET_NULL, with the name kept: the audit outlives a bank an admin removes for good.
    bank = models.ForeignKey(MemoryBank, null=True, blank=True, on_delete=models.SET_NULL, related_name="bank_events")
    bank_name = models.CharField(max_length=100)
    action = models.CharField(max_length=16, choices=Action.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    actor_name = models.CharField(max_length=150, blank=True, help_text="Kept when the account is gone.")
    note = models.TextField(blank=True)
    customer_key_sha256 = models.CharField(
        max_length=64, blank=True, db_index=True,
        help_text="Erasures: SHA-256 of the customer key, so 'was X erased?' is answerable without keeping X.")
    counts = models.JSONField(default=dict, blank=True, help_text="Erasures: rows removed, per kind.")
    # The erasure job that wrote it: a re-delivered job skips the banks it has erased already.
    job = models.ForeignKey("memweb.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                            help_text="Erasures: the background job that did it.")
    at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.action} of {self.bank_name} by {self.actor_name or 'system'}"


class HistoryEntry(AppendOnly):
    """One link of a bank's hash chain (orbs.services.history): a chained row's kind, id and content
    hash, the previous link's hash, and this link's hash over all of them. Markers (an import, an
    erasure) are links whose content is their own `detail`."""

    GENESIS = "0" * 64

    bank = models.ForeignKey(MemoryBank, on_delete=models.CASCADE, related_name="history")
    sequence = models.PositiveIntegerField(help_text="1, 2, … per bank, in the order the rows were chained.")
    kind = models.CharField(max_length=32, help_text="A history kind (memweb.registry.history_kinds) or a marker.")
    object_id = models.BigIntegerField(null=True, blank=True, help_text="The chained row's id; empty for markers.")
    content_hash = models.CharField(max_length=64, help_text="SHA-256 of the row's canonical JSON.")
    previous_hash = models.CharField(max_length=64)
    entry_hash = models.CharField(max_length=64)
    detail = models.JSONField(default=dict, blank=True, help_text="A marker's content.")
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["bank", "sequence"]
        verbose_name_plural = "history entries"
        constraints = [models.UniqueConstraint(fields=["bank", "sequence"], name="history_entry_unique_sequence")]
        indexes = [models.Index(fields=["bank", "kind", "object_id"], name="history_entry_row_idx")]

    def __str__(self) -> str:
        return f"history {self.sequence} of bank {self.bank_id}: {self.kind} {self.object_id or ''}"


class OrbProposal(models.Model):
    """An agent's request to correct (new text) or forget (delete) an Orb, with its reason. It changes
    nothing by itself: a reviewer accepts it (the edit becomes a new revision, or the Orb is deleted)
    or rejects it, with a note. No API key can decide one: the gate stays human."""

    WORKSPACE_PATH = "orb__bank__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    class Kind(models.TextChoices):
        EDIT = "edit", "edit (new text)"
        DELETE = "delete", "delete"

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        ACCEPTED = "accepted", "accepted"
        REJECTED = "rejected", "rejected"

    # The Orb's revision when it was proposed; the Orb's stable id is its lineage. CASCADE: a customer's
    # erasure, which removes their Orbs, removes what was proposed about them too.
    orb = models.ForeignKey(Orb, on_delete=models.CASCADE, related_name="proposals")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    obs = models.TextField(blank=True, help_text="Edits: the new obs, or empty to keep it.")
    emotion = models.CharField(max_length=32, blank=True, help_text="Edits: the new emotion, or empty to keep it.")
    outcome = models.TextField(blank=True, help_text="Edits: the new outcome, or empty to keep it.")
    reason = models.TextField(help_text="Why the proposer asks for it.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    proposed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    proposed_by_name = models.CharField(max_length=150, blank=True, help_text="Kept when the account is gone.")
    api_key_name = models.CharField(max_length=100, blank=True, help_text="The key that proposed it, if one did.")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_note = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["status", "created_at"], name="orb_proposal_status_idx")]

    def __str__(self) -> str:
        return f"proposal {self.pk} to {self.kind} Orb {self.orb.lineage_id} ({self.status})"
