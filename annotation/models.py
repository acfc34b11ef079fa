"""Annotation campaigns: items (a conversation with human and simulated
feedback), the feedback-writing queue, blind A/B assignments and judgments."""
import secrets
import uuid
from datetime import timedelta

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from annotation.links import link_is_safe
from annotation.metrics import HUMAN, SIMULATED, TIE
from memweb.models import workspace_field
from memweb.scoping import AllWorkspacesManager, WorkspaceManager, workspace_unscoped

# The MemoryBench study's three criteria, worded for memweb's annotators.
DEFAULT_CRITERIA = [
    {
        "key": "naturalness",
        "label": "Naturalness",
        "definition": "Which feedback reads more like something a real customer would write: "
        "natural wording, tone and length for the situation.",
    },
    {
        "key": "relevance",
        "label": "Relevance",
        "definition": "Which feedback addresses what actually happened in this conversation and "
        "the customer's request, rather than generic remarks.",
    },
    {
        "key": "overall_quality",
        "label": "Overall quality",
        # MemoryBench asks which feedback is the more plausible, reasonable reaction of a real user.
        "definition": "Taking everything into account, which feedback is the more plausible and "
        "reasonable response from a real user to this conversation.",
    },
]


def default_criteria() -> list[dict]:
    return [dict(criterion) for criterion in DEFAULT_CRITERIA]


class Reaction(models.TextChoices):
    """The like/dislike/none action of MemoryBench's feedback, for the simulated user and for people."""
    LIKE = "like", "Like"
    DISLIKE = "dislike", "Dislike"
    NONE = "none", "Neither"


def _score_field(**extra):
    return models.PositiveSmallIntegerField(null=True, blank=True,
                                            validators=[MinValueValidator(1), MaxValueValidator(10)], **extra)


def _share_field(default: float, help_text: str):
    return models.FloatField(default=default, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
                             help_text=help_text)


class Campaign(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        OPEN = "open", "Open"
        CLOSED = "closed", "Closed"

    class Strategy(models.TextChoices):
        LEAST_ANNOTATED = "least_annotated", "Least annotated first"
        MAX_DISAGREEMENT = "max_disagreement", "Least annotated first, then extra annotators on split items"

    workspace = workspace_field("campaigns")
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    def validate_unique(self, exclude=None):
        with workspace_unscoped():  # the name is unique across the server, not per workspace
            super().validate_unique(exclude)
    name = models.CharField(max_length=200, unique=True)
    instructions = models.TextField(blank=True, help_text="Markdown, shown to annotators.")
    criteria = models.JSONField(default=default_criteria)
    annotators_per_item = models.PositiveSmallIntegerField(
        default=3, validators=[MinValueValidator(1), MaxValueValidator(20)]
    )
    allow_ties = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT, db_index=True)
    deadline = models.DateTimeField(null=True, blank=True)
    assignment_timeout_minutes = models.PositiveIntegerField(
        default=30, validators=[MinValueValidator(1), MaxValueValidator(7 * 24 * 60)],
        help_text="An unfinished assignment or feedback task is handed to someone else after this long.",
    )
    assignment_strategy = models.CharField(max_length=24, choices=Strategy.choices, default=Strategy.LEAST_ANNOTATED)
    max_annotators_per_item = models.PositiveSmallIntegerField(
        default=5, validators=[MinValueValidator(1), MaxValueValidator(20)],
        help_text="Max-disagreement only: an item whose votes split gets extra annotators up to this many.",
    )
    attention_rate = models.FloatField(
        default=0.0, validators=[MinValueValidator(0.0), MaxValueValidator(0.5)],
        help_text="Share of each annotator's items that are attention checks (0 = none).",
    )
    attention_warn_below = _share_field(0.8, "An annotator whose attention-check accuracy falls below this is warned.")
    attention_exclude_below = _share_field(
        0.6, "Below this (after the minimum number of checks) their judgments leave the results.")
    attention_min_checks = models.PositiveSmallIntegerField(
        default=3, validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Checks answered before anyone can be excluded.",
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    @property
    def criterion_keys(self) -> list[str]:
        return [criterion["key"] for criterion in self.criteria]

    @property
    def categories(self) -> tuple[str, ...]:
        """The labels a judgment can take, in source terms (for kappa)."""
        return (HUMAN, SIMULATED, TIE) if self.allow_ties else (HUMAN, SIMULATED)

    @property
    def timeout(self) -> timedelta:
        return timedelta(minutes=self.assignment_timeout_minutes)

    def is_accepting_work(self, now=None) -> bool:
        now = now or timezone.now()
        return self.status == self.Status.OPEN and (self.deadline is None or self.deadline > now)

    def status_set(self, status: str) -> None:
        self.status = status
        self.save(update_fields=["status", "updated_at"])


class Item(models.Model):

    WORKSPACE_PATH = "campaign__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    class TaskFormat(models.TextChoices):
        # MemoryBench's input/output length formats: Long/Short input, Long/Short output.
        LISO = "LiSo", "LiSo (long input, short output)"
        SILO = "SiLo", "SiLo (short input, long output)"
        LILO = "LiLo", "LiLo (long input, long output)"
        SISO = "SiSo", "SiSo (short input, short output)"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="items")
    source_ref = models.CharField(max_length=200, blank=True,
                                  help_text="Where the item came from (file row id, episode).")
    # Set by the app that added the item (e.g. an evaluation run): annotation links back without knowing it.
    source_label = models.CharField(max_length=200, blank=True, help_text="Readable origin, e.g. run and episode.")
    source_url = models.CharField(max_length=500, blank=True, help_text="memweb page the item came from.")
    conversation = models.JSONField(default=list, help_text="[{role, content}, ...]")
    task_description = models.TextField(blank=True)
    evaluation_context = models.TextField(blank=True)
    human_feedback = models.TextField(blank=True)
    human_feedback_author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                              on_delete=models.SET_NULL, related_name="+")
    simulated_feedback = models.TextField()
    simulated_scripted = models.BooleanField(
        default=False, help_text="The simulated feedback came from an offline (scripted/heuristic) backend; "
        "shown to operators only, never to annotators.")
    language = models.CharField(max_length=16, db_index=True)
    task_format = models.CharField(max_length=4, choices=TaskFormat.choices, db_index=True)
    domain = models.CharField(max_length=64, db_index=True)
    is_gold = models.BooleanField(default=False, help_text="Silent gold item: scored per annotator, left out of "
                                  "kappa and win rates.")
    is_attention = models.BooleanField(default=False, help_text="Attention check (an obvious answer, e.g. one side "
                                       "empty or off-topic): injected at the campaign's rate, never counted.")
    gold_expected = models.JSONField(default=dict, blank=True, help_text="{criterion: human|simulated|tie}")
    simulated_score = _score_field(help_text="The simulated user's satisfaction score, 1-10.")
    simulated_action = models.CharField(max_length=8, choices=Reaction.choices, blank=True)
    simulated_like_probability = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="P(like | score) under the simulated user's action model.")
    created_at = models.DateTimeField(default=timezone.now)

    @property
    def source_link(self) -> str:
        """`source_url` when it is safe to link (rows stored before the import checked it may not be)."""
        return self.source_url if link_is_safe(self.source_url) else ""

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "source_ref"], condition=~Q(source_ref=""),
                                    name="annotation_item_unique_source_ref"),
        ]

    def __str__(self) -> str:
        return f"item {self.pk} ({self.language}/{self.task_format}/{self.domain})"

    @property
    def is_scored(self) -> bool:
        """Gold and attention items check annotators; only the others count in the study's figures."""
        return not (self.is_gold or self.is_attention)

    @property
    def is_ready(self) -> bool:
        """Judging opens only once the human feedback exists."""
        return bool(self.human_feedback.strip())


def _opaque_token() -> uuid.UUID:
    return uuid.uuid4()


def coin_flip() -> bool:
    # secrets, not random: the side must not be predictable from earlier draws.
    return secrets.randbelow(2) == 1


class FeedbackTask(models.Model):
    """The study's first step: an annotator writes the human feedback for an item."""

    WORKSPACE_PATH = "campaign__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        ASSIGNED = "assigned", "Assigned"
        DONE = "done", "Done"

    token = models.UUIDField(default=_opaque_token, unique=True, editable=False)
    item = models.OneToOneField(Item, on_delete=models.CASCADE, related_name="feedback_task")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="feedback_tasks")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN, db_index=True)
    writer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="annotation_feedback_tasks")
    text = models.TextField(blank=True)
    score = _score_field(help_text="The writer's own satisfaction, 1-10, as this customer.")
    action = models.CharField(max_length=8, choices=Reaction.choices, blank=True)
    assigned_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    time_spent_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["pk"]
        constraints = [
            # One task in hand per writer per campaign: a double click cannot grab two.
            models.UniqueConstraint(fields=["campaign", "writer"], condition=Q(status="assigned"),
                                    name="annotation_feedbacktask_one_active"),
        ]

    def __str__(self) -> str:
        return f"feedback task for {self.item}"


class Assignment(models.Model):
    """One annotator's turn at judging one item. `side_a_is_human` is drawn per
    assignment and never leaves the server."""

    WORKSPACE_PATH = "campaign__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    class Status(models.TextChoices):
        ASSIGNED = "assigned", "Assigned"
        COMPLETED = "completed", "Completed"
        EXPIRED = "expired", "Expired (reclaimed)"

    token = models.UUIDField(default=_opaque_token, unique=True, editable=False)
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="assignments")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                  related_name="annotation_assignments")
    side_a_is_human = models.BooleanField(default=coin_flip)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ASSIGNED, db_index=True)
    assigned_at = models.DateTimeField(default=timezone.now)
    opened_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.UniqueConstraint(fields=["item", "annotator"], condition=~Q(status="expired"),
                                    name="annotation_assignment_once_per_annotator"),
            models.UniqueConstraint(fields=["campaign", "annotator"], condition=Q(status="assigned"),
                                    name="annotation_assignment_one_active"),
        ]

    def __str__(self) -> str:
        return f"assignment {self.pk} ({self.status})"

    @property
    def server_seconds(self) -> float | None:
        start = self.opened_at or self.assigned_at
        if self.completed_at is None:
            return None
        return (self.completed_at - start).total_seconds()

    def source_of(self, side: str) -> str:
        """Which feedback sits on side "A" or "B" for this annotator."""
        a_source, b_source = (HUMAN, SIMULATED) if self.side_a_is_human else (SIMULATED, HUMAN)
        return {"A": a_source, "B": b_source, "tie": TIE}[side]

    def feedback_for_side(self, side: str) -> str:
        source = self.source_of(side)
        return self.item.human_feedback if source == HUMAN else self.item.simulated_feedback


class Judgment(models.Model):
    """What one annotator chose. `choices` keeps the A/B they clicked;
    `preferences` the same choices resolved to sources, for the statistics."""

    assignment = models.OneToOneField(Assignment, on_delete=models.CASCADE, related_name="judgment")
    choices = models.JSONField(help_text="{criterion: A|B|tie} as shown")
    preferences = models.JSONField(help_text="{criterion: human|simulated|tie}")
    comment = models.TextField(blank=True)
    score = _score_field(help_text="Optional: the annotator's own satisfaction with the conversation, 1-10.")
    action = models.CharField(max_length=8, choices=Reaction.choices, blank=True)
    time_spent_ms = models.PositiveIntegerField(default=0, help_text="Active time measured in the browser.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"judgment {self.pk}"


class Participant(models.Model):
    """An annotator's standing in a campaign, from their attention checks.
    Excluded annotators' judgments stay stored (and exported, marked) but leave
    the results; an operator's decision overrides the automatic one."""

    class Standing(models.TextChoices):
        GOOD = "good", "Good"
        WARNED = "warned", "Warned"
        EXCLUDED = "excluded", "Excluded"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="participants")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                  related_name="annotation_participations")
    standing = models.CharField(max_length=16, choices=Standing.choices, default=Standing.GOOD, db_index=True)
    attention_correct = models.PositiveIntegerField(default=0)
    attention_total = models.PositiveIntegerField(default=0)
    set_by_operator = models.BooleanField(default=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["pk"]
        constraints = [models.UniqueConstraint(fields=["campaign", "annotator"], name="annotation_participant_once")]

    def __str__(self) -> str:
        return f"{self.annotator} in {self.campaign} ({self.standing})"

    @property
    def attention_accuracy(self) -> float | None:
        return self.attention_correct / self.attention_total if self.attention_total else None


class RosterMember(models.Model):
    """An annotator the lead chose for a campaign. A campaign with no members is open to every
    annotator of its workspace (how campaigns worked before rosters)."""

    WORKSPACE_PATH = "campaign__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="roster")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                  related_name="annotation_rosters")
    added_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    added_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["annotator__username"]
        constraints = [models.UniqueConstraint(fields=["campaign", "annotator"], name="annotation_roster_once")]

    def __str__(self) -> str:
        return f"{self.annotator} on {self.campaign}"


class Stage(models.TextChoices):
    """Which of the study's two steps an annotator was at when they skipped or flagged an item."""
    WRITING = "writing", "Writing feedback"
    JUDGING = "judging", "Judging"


class Skip(models.Model):
    """An annotator passed on an item: it goes to someone else and never back to them."""

    WORKSPACE_PATH = "campaign__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="skips")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="skips")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                  related_name="annotation_skips")
    stage = models.CharField(max_length=8, choices=Stage.choices)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.annotator} skipped {self.item}"


class Flag(models.Model):
    """An annotator reported an item to the lead. While a flag is open the item is handed to nobody;
    the lead withdraws the item or clears the flag (who and when are kept)."""

    WORKSPACE_PATH = "campaign__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    class Reason(models.TextChoices):
        BROKEN = "broken", "Broken conversation"
        OFFENSIVE = "offensive", "Offensive content"
        UNCLEAR = "unclear", "Unclear what to judge"
        OTHER = "other", "Other"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="flags")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="flags")
    flagged_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                                   related_name="annotation_flags")
    stage = models.CharField(max_length=8, choices=Stage.choices)
    reason = models.CharField(max_length=16, choices=Reason.choices)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    cleared_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    cleared_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"flag on {self.item} ({self.reason})"

    @property
    def is_open(self) -> bool:
        return self.cleared_at is None


class Adjudication(models.Model):
    """The lead's final label for one criterion of a disputed item. Every decision is kept; the
    latest per item and criterion is the final label, the earlier ones its history."""

    WORKSPACE_PATH = "campaign__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    class Label(models.TextChoices):
        HUMAN = HUMAN, "Human feedback better"
        SIMULATED = SIMULATED, "Simulated feedback better"
        TIE = TIE, "Tie"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="adjudications")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="adjudications")
    criterion = models.CharField(max_length=40)
    label = models.CharField(max_length=16, choices=Label.choices)
    note = models.TextField()
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                                   related_name="annotation_adjudications")
    decided_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.item} {self.criterion}: {self.label}"
