"""Custom scores (issue 32): measures a user defines on a task set — rules over the stored transcript or
an LLM judge's rubric — and each episode's value of them, shown beside the environment's own reward.

A definition is never edited once saved: to change what a score measures, archive it and create
another. So a stored EpisodeScore always answers the definition it points at, and needs no version
to tell it is stale; the scoring job replaces an episode's row in place when it runs again (a
judge's answer may differ), keeping one row per (definition, episode).
"""
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from memweb.scoping import AllWorkspacesManager, WorkspaceManager


class ScoreKind(models.TextChoices):
    REPLY_MATCHES = "reply_matches", "reply matches"
    TOOL_CALLED = "tool_called", "tool called"
    TURNS_AT_MOST = "turns_at_most", "turns at most"
    ENDED_BY = "ended_by", "ended by"
    LLM_JUDGE = "llm_judge", "LLM judge"


class ScoreDefinition(models.Model):
    WORKSPACE_PATH = "task_set__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    task_set = models.ForeignKey("evaluation.TaskSet", on_delete=models.CASCADE, related_name="score_definitions")
    name = models.CharField(max_length=80)
    slug = models.SlugField(max_length=80)
    kind = models.CharField(max_length=16, choices=ScoreKind.choices)
    config = models.JSONField(default=dict, help_text="The kind's settings, as evaluation.scores.kinds validated them.")
    archived = models.BooleanField(default=False, db_index=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["task_set", "name"]
        # Archived definitions keep their name, so a replacement may take it again.
        constraints = [
            models.UniqueConstraint(fields=["task_set", "name"], condition=Q(archived=False),
                                    name="score_definition_unique_name"),
            models.UniqueConstraint(fields=["task_set", "slug"], condition=Q(archived=False),
                                    name="score_definition_unique_slug"),
        ]

    def __str__(self) -> str:
        return f"{self.task_set.name}/{self.name}"

    @property
    def is_pass_fail(self) -> bool:
        """Rules always answer 1/0; a judge does when its scale is pass/fail."""
        return self.kind != ScoreKind.LLM_JUDGE or self.config.get("scale") == "pass_fail"


class EpisodeScore(models.Model):
    WORKSPACE_PATH = "definition__task_set__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    class Status(models.TextChoices):
        SCORED = "scored", "scored"
        NOT_JUDGED = "not_judged", "not judged (no LLM configured)"
        ERROR = "error", "error"

    definition = models.ForeignKey(ScoreDefinition, on_delete=models.CASCADE, related_name="scores")
    episode = models.ForeignKey("evaluation.Episode", on_delete=models.CASCADE, related_name="custom_scores")
    value = models.FloatField(null=True, blank=True, help_text="1/0 for a rule or pass/fail judge; 1-5 on a scale.")
    passed = models.BooleanField(null=True, blank=True)
    explanation = models.TextField(blank=True)
    status = models.CharField(max_length=12, choices=Status.choices)
    judge = models.CharField(max_length=200, blank=True, help_text="The judge model, for an LLM judge's score.")
    scored_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["definition", "episode"]
        constraints = [models.UniqueConstraint(fields=["definition", "episode"], name="episode_score_unique")]

    def __str__(self) -> str:
        return f"{self.definition.name} of episode {self.episode_id}"
