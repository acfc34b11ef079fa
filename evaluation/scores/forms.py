from django import forms

from evaluation.models import Episode
from evaluation.scores.kinds import MODES, PATTERN_CHARS, RUBRIC_CHARS, SCALES, TOOL_NAME_CHARS
from evaluation.scores.models import ScoreKind

MODE_CHOICES = [(mode, mode.replace("_", " ")) for mode in MODES]


def _for(kind: str, field: forms.Field) -> forms.Field:
    """Mark the field as one setting of `kind`: the page shows it only while that kind is chosen."""
    field.used_by = kind
    return field


class ScoreDefinitionForm(forms.Form):
    """One form for every kind; only the chosen kind's settings are read (and validated, by
    evaluation.scores.kinds, whose errors come back to the field they name)."""

    name = forms.CharField(max_length=80, help_text="Shown as the score's column beside the reward.")
    kind = forms.ChoiceField(choices=ScoreKind.choices, initial=ScoreKind.REPLY_MATCHES)
    pattern = _for(ScoreKind.REPLY_MATCHES, forms.CharField(
        required=False, label="Regular expression", max_length=PATTERN_CHARS,
        help_text="Searched in each agent reply (Python syntax, case-sensitive unless it starts with (?i))."))
    reply_mode = _for(ScoreKind.REPLY_MATCHES, forms.ChoiceField(
        choices=MODE_CHOICES, required=False, label="A reply", help_text="must: at least one reply matches; "
                                                                         "must not: none does."))
    tool = _for(ScoreKind.TOOL_CALLED, forms.CharField(required=False, label="Tool name", max_length=TOOL_NAME_CHARS))
    tool_mode = _for(ScoreKind.TOOL_CALLED, forms.ChoiceField(choices=MODE_CHOICES, required=False,
                                                              label="The tool"))
    min_count = _for(ScoreKind.TOOL_CALLED, forms.CharField(required=False, label="Called at least (times)"))
    max_count = _for(ScoreKind.TOOL_CALLED, forms.CharField(required=False, label="Called at most (times)"))
    turns = _for(ScoreKind.TURNS_AT_MOST, forms.CharField(required=False, label="Turns at most"))
    ended_by = _for(ScoreKind.ENDED_BY, forms.ChoiceField(
        choices=[("", "—"), *Episode.EndedBy.choices], required=False, label="Ended by"))
    rubric = _for(ScoreKind.LLM_JUDGE, forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 4}), max_length=RUBRIC_CHARS,
        help_text="What the judge checks. It reads only the conversation and tool calls, never the task's gold."))
    scale = _for(ScoreKind.LLM_JUDGE, forms.ChoiceField(choices=list(SCALES.items()), required=False))

    # The config keys whose form field is named otherwise.
    MODE_FIELD = {ScoreKind.REPLY_MATCHES: "reply_mode", ScoreKind.TOOL_CALLED: "tool_mode"}

    def config(self) -> dict:
        """The chosen kind's settings, keyed as evaluation.scores.kinds reads them."""
        data, kind = self.cleaned_data, self.cleaned_data.get("kind")
        settings = {name: data.get(name) for name, field in self.fields.items()
                    if getattr(field, "used_by", None) == kind and name not in self.MODE_FIELD.values()}
        if kind in self.MODE_FIELD:
            settings["mode"] = data.get(self.MODE_FIELD[kind])
        return settings

    def add_config_errors(self, errors: dict[str, str]) -> None:
        kind = self.cleaned_data.get("kind")
        for key, message in errors.items():
            field = self.MODE_FIELD.get(kind, key) if key == "mode" else key
            self.add_error(field if field in self.fields else None, message)
