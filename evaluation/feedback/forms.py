"""Forms of the feedback pages; each error names its field."""
import pydantic
from django import forms

from annotation.services import campaigns_with_action_pairs
from evaluation.feedback import formulas as fm
from evaluation.feedback.models import CalibrationSetting, EpisodeFeedback, FeedbackProfile
from evaluation.feedback.params import FeedbackParams
from evaluation.feedback.services import BACKEND_FILTERS, run_episodes, runs_all
from evaluation.models import Domain, Episode
from memweb.errors import problems_of

SELECTION_SIZES = (("50", "latest 50"), ("200", "latest 200"), ("1000", "latest 1000"), ("all", "all"))
SCORE_CHOICES = [("", "any")] + [(str(s), str(s)) for s in range(1, 11)]


class CalibrationForm(forms.Form):
    s0_like = forms.FloatField(label="S0L (like midpoint)")
    s0_dislike = forms.FloatField(label="S0D (dislike midpoint)")
    k_like = forms.FloatField(label="kL (like steepness)")
    k_dislike = forms.FloatField(label="kD (dislike steepness)")
    like_rate = forms.FloatField(label="Target P(L)", help_text="Global like rate; default 0.065 × 0.86.")
    dislike_rate = forms.FloatField(label="Target P(D)", help_text="Global dislike rate; default 0.065 × 0.14.")
    distribution = forms.CharField(
        label="Score distribution p(S), S = 1..10", widget=forms.TextInput(attrs={"class": "mono"}),
        help_text="Ten non-negative weights separated by commas (percent or counts); normalised before use.")
    like_shift = forms.FloatField(label="Like-threshold shift (noise)",
                                  help_text="Added to S0L: + selective, − lenient.")
    score_sigma = forms.FloatField(label="Score noise σ", help_text="Gaussian noise on S before actions are drawn.")
    metric = forms.ChoiceField(label="Offline score", choices=CalibrationSetting.Metric.choices)
    use_llm = forms.BooleanField(label="Use the user-simulator and scorer LLMs when configured", required=False)
    binary_low_share = forms.FloatField(
        label="Binary model: share of low scores",
        help_text="P(S_low) under the reference distribution (and in a run calibrated on its realised scores "
        f"until it has enough of them); {fm.BINARY_LOW_SHARE} gives the paper's P(D|3) ≈ 2.1 % and P(L|9) ≈ 9.9 %.")

    @classmethod
    def for_setting(cls, setting: CalibrationSetting) -> "CalibrationForm":
        initial = {name: getattr(setting, name) for name in CalibrationSetting.PARAM_FIELDS}
        initial["distribution"] = ", ".join(f"{w:g}" for w in setting.distribution)
        return cls(initial=initial)

    def clean_distribution(self) -> tuple[float, ...]:
        parts = [p.strip() for p in self.cleaned_data["distribution"].split(",") if p.strip()]
        try:
            weights = tuple(float(p) for p in parts)
        except ValueError:
            raise forms.ValidationError("Every weight must be a number.") from None
        if len(weights) != 10:
            raise forms.ValidationError(f"Give exactly 10 weights (S = 1..10), got {len(weights)}.")
        if any(w < 0 for w in weights) or sum(weights) <= 0:
            raise forms.ValidationError("Weights must be non-negative and not all zero.")
        return weights

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        try:
            self.params = FeedbackParams(**cleaned)
            self.params.check()
        except pydantic.ValidationError as exc:
            for field, message in problems_of(exc, whole=""):
                self.add_error(field.split(".")[0] or None, message)
        except ValueError as exc:
            self.add_error(None, str(exc))
        return cleaned


class CampaignFitForm(forms.Form):
    """Which annotation campaign's people the action model is refitted to; only campaigns that have
    conversations with a simulated score and a majority action are offered."""

    campaign = forms.TypedChoiceField(coerce=int, empty_value=None, label="Campaign")

    def __init__(self, *args, workspace, **kwargs):
        super().__init__(*args, **kwargs)
        found = campaigns_with_action_pairs(workspace=workspace)
        self.campaigns = {campaign.pk: campaign for campaign, _ in found}
        self.fields["campaign"].choices = [("", "choose a campaign"), *(
            (campaign.pk, f"{campaign.name} ({n} conversation{'s' if n != 1 else ''})") for campaign, n in found)]

    def clean_campaign(self):
        return self.campaigns[self.cleaned_data["campaign"]]


def _run_field() -> forms.ModelChoiceField:
    # Names only: a run's stored metrics (bootstrap series) are large, and every run is an option.
    return forms.ModelChoiceField(queryset=runs_all().only("id", "name"), required=False, empty_label="any run",
                                  label="Run")


class SelectionForm(forms.Form):
    """Which episodes' feedback the rates and recalibration use: a run's, or the latest ones."""

    run = _run_field()
    latest = forms.ChoiceField(choices=SELECTION_SIZES, required=False, initial="200",
                               help_text="Ignored when a run is chosen: all its episodes count.")
    domain = forms.ChoiceField(choices=[("", "any domain"), *Domain.choices], required=False)

    def __init__(self, data=None, *, workspace, **kwargs):
        self.workspace = workspace
        # A query string without `latest` (e.g. only a domain or a campaign) would render "latest 50",
        # the first option, while the episodes counted are the default 200.
        if data is not None and not data.get("latest"):
            data = data.copy()
            data["latest"] = "200"
        super().__init__(data, **kwargs)
        self.fields["run"].queryset = self.fields["run"].queryset.of(workspace)

    def _data(self) -> dict:
        return self.cleaned_data if self.is_valid() else {}

    def episodes(self):
        data = self._data()
        episodes = run_episodes(run=data["run"]) if data.get("run") else Episode.objects.of(self.workspace)
        episodes = episodes.filter(simulated_feedback__isnull=False)
        if data.get("domain"):
            episodes = episodes.filter(task__domain=data["domain"])
        size = data.get("latest") or "200"
        return episodes if data.get("run") or size == "all" else episodes[:int(size)]

    def label(self) -> str:
        data = self._data()
        size = data.get("latest") or "200"
        what = "all episodes" if size == "all" else f"the latest {size} episodes"
        what = f"run “{data['run']}”" if data.get("run") else what
        return what + (f", {data['domain']}" if data.get("domain") else "")


class ProfileForm(forms.ModelForm):
    class Meta:
        model = FeedbackProfile
        fields = ["key", "name", "persona", "domain_expertise", "evaluation_criteria", "behaviour_rules", "language",
                  "long_output"]
        widgets = {name: forms.Textarea(attrs={"rows": 4})
                   for name in ("persona", "domain_expertise", "evaluation_criteria", "behaviour_rules")}


class BrowserForm(forms.Form):
    run = _run_field()
    action = forms.ChoiceField(choices=[("", "any action"), *EpisodeFeedback.Action.choices], required=False)
    score_min = forms.TypedChoiceField(choices=SCORE_CHOICES, coerce=int, empty_value=None, required=False,
                                       label="Score from")
    score_max = forms.TypedChoiceField(choices=SCORE_CHOICES, coerce=int, empty_value=None, required=False,
                                       label="Score to")
    backend = forms.ChoiceField(required=False, label="Critique by", choices=[
        ("", "any backend"), *((key, backend.label) for key, backend in BACKEND_FILTERS.items())])

    def __init__(self, *args, workspace, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["run"].queryset = self.fields["run"].queryset.of(workspace)

    def clean(self):
        cleaned = super().clean()
        low, high = cleaned.get("score_min"), cleaned.get("score_max")
        if low is not None and high is not None and low > high:
            self.add_error("score_max", "Must not be below 'score from'.")
        return cleaned

    def filters(self) -> dict:
        """Keyword arguments for services.feedback_browse."""
        if not self.is_valid():
            return {}
        filters = {k: v for k, v in self.cleaned_data.items() if k != "run"}
        return {**filters, "episodes": run_episodes(run=self.cleaned_data["run"]) if self.cleaned_data["run"] else None}
