"""Forms of the task and episode pages; each error names its field."""
from django import forms

from evaluation.configs import AgentBackend, CustomerBackend, MemoryKind
from evaluation.environments import DEFAULT_ENVIRONMENT, DEFAULT_MAX_TURNS, ERROR_KINDS, environments
from evaluation.memory_layers.registry import memory_layer_choices
from evaluation.models import Difficulty, Domain, ErrorKind, Split, TaskSet
from evaluation.services.episode_search import EpisodeFilters, reward_component_choices
from evaluation.services.traces import TraceFilters, call_models_of, call_roles_of
from memweb.jsonl import upload_text
from memweb.models import LLMCall

MAX_UPLOAD_BYTES = 5 * 1024 * 1024


def _choices(choices, blank: str) -> list[tuple[str, str]]:
    return [("", blank), *choices]


class TaskFilterForm(forms.Form):
    task_set = forms.ModelChoiceField(queryset=TaskSet.objects.all(), required=False, empty_label="all task sets",
                                      to_field_name="name")
    domain = forms.ChoiceField(required=False, choices=_choices(Domain.choices, "any domain"))
    split = forms.ChoiceField(required=False, choices=_choices(Split.choices, "any split"))
    difficulty = forms.ChoiceField(required=False, choices=_choices(Difficulty.choices, "any difficulty"))
    error_kind = forms.ChoiceField(required=False, choices=_choices(ErrorKind.choices, "any error kind"),
                                   label="Error kind")
    q = forms.CharField(required=False, max_length=200, label="Search",
                        widget=forms.TextInput(attrs={"type": "search", "placeholder": "id, intent, customer"}))

    def __init__(self, *args, workspace, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["task_set"].queryset = TaskSet.objects.of(workspace)

    def filters(self) -> dict:
        if not self.is_valid():
            return {}
        data = self.cleaned_data
        return {"task_set": data["task_set"], "domain": data["domain"], "split": data["split"],
                "difficulty": data["difficulty"], "error_kind": data["error_kind"], "q": data["q"]}


class EpisodeFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Said in the transcript",
                        widget=forms.TextInput(attrs={"type": "search", "placeholder": "e.g. refund \"wrong size\""}))
    run = forms.IntegerField(required=False, min_value=1, label="Run #",
                             widget=forms.NumberInput(attrs={"placeholder": "any run"}))
    task = forms.CharField(required=False, max_length=100, label="Task id",
                           widget=forms.TextInput(attrs={"placeholder": "any task"}))
    outcome = forms.ChoiceField(required=False, choices=_choices((("success", "success"), ("failure", "failure")),
                                                                 "any outcome"))
    component = forms.ChoiceField(required=False, choices=lambda: _choices(reward_component_choices(), "any component"),
                                  label="Failed reward component")
    memory = forms.ChoiceField(required=False, choices=lambda: _choices(memory_layer_choices(), "any memory"),
                               label="Memory mode")
    backend = forms.ChoiceField(required=False, choices=_choices((("scripted", "scripted agent"), ("llm", "LLM agent")),
                                                                 "any agent"), label="Agent backend")
    min_latency = forms.IntegerField(required=False, min_value=0, max_value=2**31 - 1, label="Min latency (ms)",
                                     widget=forms.NumberInput(attrs={"placeholder": "any latency"}))
    error = forms.ChoiceField(required=False, label="Errors", choices=_choices(
        (("infrastructure", "infrastructure error"), ("llm", "LLM call error")), "any or none"))
    model = forms.ChoiceField(required=False, label="LLM model")

    def __init__(self, *args, workspace, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["model"].choices = _choices(_same(call_models_of(workspace)), "any model")

    def filters(self) -> EpisodeFilters:
        """The valid filters (a field with an error filters nothing; the form shows why)."""
        self.is_valid()
        return EpisodeFilters(**{name: value for name, value in self.cleaned_data.items() if value not in (None, "")})


def _same(values: list[str]) -> list[tuple[str, str]]:
    return [(value, value) for value in values]


class TraceFilterForm(forms.Form):
    """The traces page's filters; roles and models are the ones the workspace's calls used."""
    role = forms.ChoiceField(required=False, label="LLM role")
    model = forms.ChoiceField(required=False, label="Model")
    status = forms.ChoiceField(required=False, label="Status", choices=_choices(LLMCall.Status.choices, "any status"))
    min_latency = forms.IntegerField(required=False, min_value=0, max_value=2**31 - 1, label="Min latency (ms)",
                                     widget=forms.NumberInput(attrs={"placeholder": "any latency"}))
    run = forms.IntegerField(required=False, min_value=1, max_value=2**31 - 1, label="Run #",
                             widget=forms.NumberInput(attrs={"placeholder": "any run"}))

    def __init__(self, *args, workspace, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["role"].choices = _choices(_same(call_roles_of(workspace)), "any role")
        self.fields["model"].choices = _choices(_same(call_models_of(workspace)), "any model")

    def filters(self) -> TraceFilters:
        """The valid filters (a field with an error filters nothing; the form shows why)."""
        self.is_valid()
        return TraceFilters(**{name: value for name, value in self.cleaned_data.items() if value not in (None, "")})


class BenchmarkImportForm(forms.Form):
    benchmark = forms.ChoiceField(label="Benchmark")
    path = forms.CharField(max_length=1000, label="Folder on the server",
                           help_text="A checkout of the benchmark, or its JSON folder (docs/BENCHMARKS.md).")
    task_set = forms.CharField(required=False, max_length=100, label="Task set name",
                               help_text="Empty: the benchmark's name. Tasks already in the set are updated.")

    def __init__(self, *args, benchmarks: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["benchmark"].choices = [(name, name) for name in benchmarks]


class TaskImportForm(forms.Form):
    task_set = forms.CharField(max_length=100, label="Task set name",
                               help_text="A new name creates a set; an existing one is extended (same ids updated).")
    description = forms.CharField(required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))
    environment = forms.ChoiceField(required=False, label="Environment", initial=DEFAULT_ENVIRONMENT,
                                    help_text="The task world the tasks are played in; its validator checks each line.")
    file = forms.FileField(required=False, label="JSONL file", help_text="One task per line, as exported.")
    text = forms.CharField(required=False, label="…or paste JSONL", widget=forms.Textarea(attrs={"rows": 6,
                                                                                                "class": "mono"}))

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["environment"].choices = [(world.name, world.label) for world in environments()]

    def clean_environment(self) -> str:
        return self.cleaned_data.get("environment") or DEFAULT_ENVIRONMENT

    def clean_file(self):
        upload = self.cleaned_data.get("file")
        if upload is None:
            return ""
        text, problem = upload_text(upload, max_bytes=MAX_UPLOAD_BYTES)
        if problem:
            raise forms.ValidationError(f"The file is {problem.reason}.")
        return text

    def clean(self):
        cleaned = super().clean()
        if not self.errors and not cleaned.get("file") and not cleaned.get("text", "").strip():
            self.add_error("file", "Choose a JSONL file or paste its lines.")
        return cleaned

    def jsonl(self) -> str:
        """The lines to import: the uploaded file's text, else the pasted text."""
        return self.cleaned_data["file"] or self.cleaned_data["text"]


class PlayForm(forms.Form):
    """Play one episode of a task with the offline backends (or the LLM roles when configured)."""

    agent = forms.ChoiceField(choices=AgentBackend.choices)
    customer = forms.ChoiceField(choices=CustomerBackend.choices)
    seed = forms.IntegerField(initial=0, min_value=0, max_value=2**31 - 1)
    max_turns = forms.IntegerField(initial=DEFAULT_MAX_TURNS, min_value=1, max_value=50, label="Max turns")
    wrong_tool = forms.FloatField(initial=0.0, min_value=0.0, max_value=1.0, label="Wrong-tool rate")
    wrong_arguments = forms.FloatField(initial=0.0, min_value=0.0, max_value=1.0, label="Wrong-arguments rate")
    result_unused = forms.FloatField(initial=0.0, min_value=0.0, max_value=1.0, label="Result-unused rate")
    bank = forms.CharField(required=False, max_length=200, label="MemOrb bank",
                           help_text="Name of a memory bank to retrieve from before each turn; empty for no memory.")

    def configs(self) -> dict:
        data = self.cleaned_data
        memory = ({"kind": MemoryKind.MEMORB, "bank": data["bank"].strip()} if data["bank"].strip()
                  else {"kind": MemoryKind.NONE})
        return {
            "agent_config": {"backend": data["agent"], "error_rates": {k: data[k] for k in ERROR_KINDS if data[k]}},
            "customer_config": {"backend": data["customer"]},
            "memory_config": memory,
            "seed": data["seed"],
            "max_turns": data["max_turns"],
        }
