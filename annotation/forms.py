"""Operator forms: campaign settings (criteria edited as plain lines) and uploads."""
from django import forms
from django.utils.text import slugify

from annotation.models import Campaign, Item
from annotation.services import campaign_has_judgments, criteria_problem

FROZEN_ONCE_JUDGED = ("criteria_text", "annotators_per_item", "allow_ties")
# Quality-control settings: left out of a post, they keep the campaign's value (or the default).
QUALITY_FIELDS = ("assignment_strategy", "max_annotators_per_item", "attention_rate", "attention_warn_below",
                  "attention_exclude_below", "attention_min_checks")
SCORE_CHOICES = [("", "Choose…"), *((str(score), str(score)) for score in range(1, 11))]


def criteria_to_text(criteria: list[dict]) -> str:
    return "\n".join(f"{criterion['label']}: {criterion.get('definition', '')}".rstrip() for criterion in criteria)


def criteria_from_text(text: str) -> list[dict]:
    """One criterion per line, "Label: definition"; the key is the label in snake_case."""
    criteria = []
    for line in text.splitlines():
        if not line.strip():
            continue
        label, _, definition = line.partition(":")
        key = slugify(label).replace("-", "_")
        criteria.append({"key": key, "label": label.strip(), "definition": definition.strip()})
    return criteria


class CampaignForm(forms.ModelForm):
    criteria_text = forms.CharField(
        label="Criteria", widget=forms.Textarea(attrs={"rows": 4}),
        help_text='One per line: "Label: definition". Frozen once the first judgment exists.',
    )
    deadline = forms.DateTimeField(required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"},
                                                                              format="%Y-%m-%dT%H:%M"))

    class Meta:
        model = Campaign
        fields = ["name", "instructions", "annotators_per_item", "allow_ties", "deadline",
                  "assignment_timeout_minutes", *QUALITY_FIELDS]
        widgets = {"instructions": forms.Textarea(attrs={"rows": 8})}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["criteria_text"].initial = criteria_to_text(self.instance.criteria)
        for name in QUALITY_FIELDS:
            self.fields[name].required = False
        if self.instance.pk and campaign_has_judgments(campaign=self.instance):
            for name in FROZEN_ONCE_JUDGED:
                self.fields[name].disabled = True

    def clean_criteria_text(self) -> str:
        text = self.cleaned_data["criteria_text"]
        problem = criteria_problem(criteria_from_text(text))
        if problem:
            raise forms.ValidationError(problem)
        return text

    def save(self, commit: bool = True) -> Campaign:
        self.instance.criteria = criteria_from_text(self.cleaned_data["criteria_text"])
        return super().save(commit=commit)


    def clean(self):
        cleaned = super().clean()
        warn, exclude = cleaned.get("attention_warn_below"), cleaned.get("attention_exclude_below")
        if warn is not None and exclude is not None and exclude > warn:
            self.add_error("attention_exclude_below", "must not be above the warning threshold: warn first, then exclude")
        return cleaned


class UploadForm(forms.Form):
    file = forms.FileField(help_text="A .jsonl or .csv file; see the field list below.")


class CampaignFilterForm(forms.Form):
    q = forms.CharField(required=False, label="Search")
    status = forms.ChoiceField(required=False, choices=[("", "Any status"), *Campaign.Status.choices])


class CampaignImportForm(forms.Form):
    file = forms.FileField(help_text="A campaign file exported from memweb (.jsonl).")
    name = forms.CharField(required=False, max_length=200, help_text="Optional: import under another name.")


class ItemEditForm(forms.Form):
    """An item's corrections before judging; services.item_update checks them as an upload row."""
    task_description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    evaluation_context = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    simulated_feedback = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}))
    language = forms.CharField(max_length=16, help_text="A code such as en, zh or pt-BR.")
    task_format = forms.ChoiceField(choices=Item.TaskFormat.choices)
    domain = forms.CharField(max_length=64)
