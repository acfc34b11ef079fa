"""Models of the evaluation app's feedback part (registered by EvaluationConfig.import_models).

FeedbackProfile: who the simulated user is, per task family (domain). CalibrationSetting: the one
active set of action-model parameters. EpisodeFeedback: the simulated user's judgement of one
episode's final reply — the MemoryBench tuple (termination signal, natural-language response,
UI action, satisfaction score) with where each part came from.
"""
from django.conf import settings
from django.db import models
from django.utils import timezone

from evaluation.feedback.params import FeedbackParams
from evaluation.feedback.prompts import profile_prompt
from memweb.llm.backends import TextBackend
from memweb.scoping import AllWorkspacesManager, WorkspaceManager

__all__ = ["CalibrationSetting", "EpisodeFeedback", "FeedbackProfile"]


class FeedbackProfile(models.Model):
    key = models.SlugField(max_length=64, unique=True, help_text="Task family: the task's domain, e.g. appliances.")
    name = models.CharField(max_length=120)
    persona = models.TextField()
    domain_expertise = models.TextField()
    evaluation_criteria = models.TextField()
    behaviour_rules = models.TextField()
    language = models.CharField(max_length=40, default="English", help_text="The language the user answers in.")
    long_output = models.BooleanField(
        default=False,
        help_text="Whether this task family's outputs are long (MemoryBench: answers that run past 600 tokens, "
                  "e.g. writing): every reply of a long-output family may be copied (P(copy|S) = 4·P(like|S)), "
                  "none of a short-output one. Customer-service replies are short.")
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return f"{self.key}: {self.name}"

    def system_prompt(self) -> str:
        return profile_prompt(persona=self.persona, domain_expertise=self.domain_expertise,
                              evaluation_criteria=self.evaluation_criteria, behaviour_rules=self.behaviour_rules)


class CalibrationSetting(models.Model):
    """A single row (pk 1): the parameters new feedback is generated with."""

    class CalibrateOn(models.TextChoices):
        """Where a run takes p(S) from (the run's setting `RunSpec.feedback_calibration`, read as
        `run.run_spec.feedback_calibration`). The reference is the default: calibrating each run on its
        own scores pins every run's like rate at the target, so likes could no longer rank systems."""
        REFERENCE = "reference", "the reference distribution (by default MemoryBench's)"
        REALISED = "realised", "variant: the run's own realised scores (the reference when too few)"

    class Metric(models.TextChoices):
        SHOP = "shop", "shop reward breakdown (S = 1..10)"
        CORRECTNESS = "correctness", "binary correctness (S = 9 or 3, binary action model)"

    s0_like = models.FloatField(default=7.5)
    s0_dislike = models.FloatField(default=4.5)
    k_like = models.FloatField(default=1.5)
    k_dislike = models.FloatField(default=1.5)
    like_rate = models.FloatField(default=FeedbackParams.model_fields["like_rate"].default)
    dislike_rate = models.FloatField(default=FeedbackParams.model_fields["dislike_rate"].default)
    distribution = models.JSONField(default=list, help_text="Weights of S = 1..10 (percent or counts).")
    distribution_source = models.CharField(max_length=300, default="MemoryBench reference distribution")
    like_shift = models.FloatField(default=0.0)
    score_sigma = models.FloatField(default=0.0)
    metric = models.CharField(max_length=16, choices=Metric.choices, default=Metric.SHOP)
    use_llm = models.BooleanField(default=True)
    binary_low_share = models.FloatField(default=FeedbackParams.model_fields["binary_low_share"].default)
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    PARAM_FIELDS = ("s0_like", "s0_dislike", "k_like", "k_dislike", "like_rate", "dislike_rate", "like_shift",
                    "score_sigma", "metric", "use_llm", "binary_low_share")

    def __str__(self) -> str:
        return f"calibration ({self.distribution_source})"

    @classmethod
    def current(cls) -> "CalibrationSetting":
        setting, _ = cls.objects.get_or_create(
            pk=1, defaults={"distribution": list(FeedbackParams().distribution)})
        return setting

    def params(self) -> FeedbackParams:
        return FeedbackParams(distribution=tuple(self.distribution),
                              **{name: getattr(self, name) for name in self.PARAM_FIELDS})


class EpisodeFeedback(models.Model):
    WORKSPACE_PATH = "episode__task__task_set__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    class Behavior(models.TextChoices):
        CONTINUE = "continue_conversation", "continue"
        END = "end_conversation", "end"

    class Action(models.TextChoices):
        LIKE = "like", "like"
        DISLIKE = "dislike", "dislike"
        NONE = "none", "none"

    class ScoreMethod(models.TextChoices):
        LLM = "llm", "LLM scorer"
        SHOP = "shop", "shop reward breakdown"
        CORRECTNESS = "correctness", "binary correctness"

    Backend = TextBackend  # who wrote a critique or score: the same labels as every LLM role's output

    episode = models.OneToOneField("evaluation.Episode", on_delete=models.CASCADE,
                                   related_name="simulated_feedback")
    profile = models.ForeignKey(FeedbackProfile, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="feedback")
    judged_index = models.PositiveIntegerField(
        null=True, blank=True, help_text="Transcript index of the judged agent reply (none if it never replied).")
    behavior = models.CharField(max_length=24, choices=Behavior.choices)
    reasoning = models.TextField(blank=True)
    response = models.TextField(blank=True, help_text="Empty when the user ends the conversation.")
    critique_backend = models.CharField(max_length=200)
    score = models.PositiveSmallIntegerField(help_text="Satisfaction S, 1..10.")
    sampled_score = models.PositiveSmallIntegerField(help_text="The S actions were drawn from (S after noise).")
    score_method = models.CharField(max_length=16, choices=ScoreMethod.choices)
    score_backend = models.CharField(max_length=200)
    action = models.CharField(max_length=8, choices=Action.choices, db_index=True)
    copied = models.BooleanField(default=False)
    errors = models.JSONField(default=list, help_text="LLM failures: [{stage, error}], each answered offline.")
    rounds = models.JSONField(
        default=list, blank=True,
        help_text="Feedback rounds after the first (multi-turn feedback): the agent's revision in answer to the "
                  "previous critique, and the user's critique, score and action on it.")
    seed = models.BigIntegerField()
    params = models.JSONField(help_text="FeedbackParams snapshot, plus profile key and long_output.")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(condition=models.Q(score__gte=1, score__lte=10), name="feedback_score_1_10"),
            models.CheckConstraint(condition=models.Q(sampled_score__gte=1, sampled_score__lte=10),
                                   name="feedback_sampled_score_1_10"),
        ]

    def __str__(self) -> str:
        return f"feedback on episode {self.episode_id}: S={self.score}, {self.action}"

    @property
    def critique(self) -> str:
        """What the user said, or, when it ended the conversation without a word, its reasoning."""
        return self.response or self.reasoning

    @property
    def critique_scripted(self) -> bool:
        return TextBackend.is_scripted(self.critique_backend)

    @property
    def score_scripted(self) -> bool:
        return TextBackend.is_scripted(self.score_backend)

    @property
    def judged_response(self) -> str:
        if self.judged_index is None:
            return ""
        return self.episode.transcript[self.judged_index].get("content") or ""
