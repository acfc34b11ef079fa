"""Forms of the runs pages. The launch form only gathers values; evaluation.runs.services.run_launch
validates them, and its problems are shown on the field they name."""
import json
import typing

from django import forms
from django.db import models

from annotation.services import campaigns_addable
from evaluation.configs import AgentBackend, AgentConfig, CustomerBackend, CustomerConfig, MemoryKind, ReflectionInput
from evaluation.environments import ERROR_KINDS
from evaluation.memory_layers.registry import memory_layer_choices, memory_layers
from evaluation.models import Domain, Split, TaskSet
from evaluation.runs.models import (
    EvaluationMode,
    EvaluationRun,
    FeedbackCalibration,
    FeedbackMemory,
    ReviewGate,
    RunPreset,
    SplitRule,
)
from evaluation.runs.services import MAX_CONCURRENCY, MAX_TRIALS, DMRMParams, RunLaunchError, RunSpec
from evaluation.runs.services.spec import PRESETS, CMaxRule, DMRMWriteTiming
from evaluation.runs.services.studies import SELECTIONS
from evaluation.services import BUILTIN_SET
from orbs.dmrm.services import StateMatch, Suppression
from orbs.services import ReflectionStyle, banks_all

MAX_UPLOAD_BYTES = 20 * 1024 * 1024
DEFAULT_ERROR_RATE = 0.3  # the scripted agent errs sometimes, so memory has something to fix
_BROWSER_BOUNDS = {"ge": "min", "le": "max"}


def _choices(choices, blank: str) -> list[tuple[str, str]]:
    return [("", blank), *choices]


def _spec_field(field_class, name: str, *, spec=RunSpec, **options):
    """A form field for one of the spec's settings, with the spec's default, description and
    bounds. The bounds only guide the browser: run_launch checks the spec and names the field."""
    info = spec.model_fields[name]
    bounds = {_BROWSER_BOUNDS[kind]: getattr(m, kind) for m in info.metadata for kind in _BROWSER_BOUNDS
              if hasattr(m, kind)}
    if bounds:
        options["widget"] = forms.NumberInput(attrs=bounds)
    options.setdefault("initial", info.get_default(call_default_factory=True))
    options.setdefault("help_text", info.description or "")
    return field_class(**options)


def _capped(max_tokens: int | None) -> dict:
    return {} if max_tokens is None else {"max_tokens": max_tokens}


def _windowed(context_tokens: int | None) -> dict:
    return {} if context_tokens is None else {"context_tokens": context_tokens}


def _dmrm_field(field_class, name: str, **options):
    return _spec_field(field_class, name, spec=DMRMParams, required=False, **options)


# RunSpec fields the launch form composes from several fields or looks up (sections, lists, rows).
_COMPOSED = ("task_set", "task_ids", "agent", "customer", "bank_source", "dmrm")
_GENERIC_FIELDS = {bool: forms.BooleanField, int: forms.IntegerField, float: forms.FloatField, str: forms.CharField}


def _spec_settings() -> list[str]:
    """The spec's settings that map to one form field each."""
    return [name for name in RunSpec.model_fields if name not in _COMPOSED]


def _generic_field(name: str) -> forms.Field:
    """A form field for a setting the form has no hand-made one for, from its type in the spec."""
    annotation = RunSpec.model_fields[name].annotation
    kind = next((arg for arg in typing.get_args(annotation) if arg is not type(None)), annotation)
    label = name.replace("_", " ").capitalize()
    if isinstance(kind, type) and issubclass(kind, models.Choices):
        return _spec_field(forms.ChoiceField, name, spec=RunSpec, choices=_choices(kind.choices, "default"),
                           required=False, label=label)
    return _spec_field(_GENERIC_FIELDS.get(kind, forms.CharField), name, spec=RunSpec, required=False, label=label)


# Launch-form fields only some memory layers use, by the RunSpec setting each one sets.
_LAYER_SETTINGS = {
    **{name: name for name in ("memory_k", "per_turn", "same_customer_only", "bank_source", "approved_only",
                               "reflection_style", "reflection_input", "review_gate", "memory_effects",
                               "withhold_probability", "external_url", "external_key", "feedback_memory")},
    **{f"dmrm_{name}": "dmrm" for name in DMRMParams.model_fields}}
# The memory section's groups of those fields, in page order.
_LAYER_GROUPS = (
    ("Retrieval", ("memory_k", "per_turn", "same_customer_only", "bank_source")),
    ("Reflections and review", ("reflection_style", "reflection_input", "approved_only", "review_gate")),
    ("Effect measurement", ("memory_effects", "withhold_probability")),
    ("External service", ("external_url", "external_key")),
    ("DMRM", tuple(f"dmrm_{name}" for name in DMRMParams.model_fields)))


def _layers_using(setting: str) -> list:
    return [layer for layer in memory_layers().values() if setting not in layer.unused_settings()]


def _layers_text(layers: list) -> str:
    """Which layers a group of fields is for, in words: "every memory layer" or their labels."""
    with_memory = {name for name, layer in memory_layers().items() if layer.remembers}
    if {layer.name for layer in layers} == with_memory:
        return "every memory layer"
    return ", ".join(layer.label for layer in layers)


def _chosen_layer(data: dict):
    """The memory layer a launch asks for: the preset's when it sets one, else the form's choice."""
    return memory_layers().get(PRESETS.get(data.get("preset"), {}).get("memory_mode") or data.get("memory_mode"))


class RunLaunchForm(forms.Form):
    name = forms.CharField(max_length=200)
    task_set = forms.ModelChoiceField(queryset=TaskSet.objects.all(), to_field_name="name", required=False,
                                      empty_label=f"built-in ({BUILTIN_SET})")
    domain = forms.ChoiceField(required=False, choices=_choices(Domain.choices, "any domain"))
    split = forms.ChoiceField(required=False, choices=_choices(Split.choices, "any split"))
    task_ids = forms.CharField(required=False, label="Task ids", help_text="Comma- or space-separated; empty for all.",
                               widget=forms.TextInput(attrs={"placeholder": "shop-app-001, shop-clo-008"}))
    agent = forms.ChoiceField(choices=AgentBackend.choices)
    wrong_tool = forms.FloatField(initial=DEFAULT_ERROR_RATE, min_value=0, max_value=1, label="Wrong-tool rate")
    wrong_arguments = forms.FloatField(initial=DEFAULT_ERROR_RATE, min_value=0, max_value=1,
                                       label="Wrong-arguments rate")
    result_unused = forms.FloatField(initial=DEFAULT_ERROR_RATE, min_value=0, max_value=1, label="Result-unused rate",
                                     help_text="Scripted agent only: chance per episode of each error kind.")
    customer = forms.ChoiceField(choices=CustomerBackend.choices)
    agent_max_tokens = _spec_field(forms.IntegerField, "max_tokens", spec=AgentConfig, required=False,
                                   label="Agent max tokens")
    agent_context_tokens = _spec_field(forms.IntegerField, "context_tokens", spec=AgentConfig, required=False,
                                       label="Agent context window (tokens)")
    customer_max_tokens = _spec_field(forms.IntegerField, "max_tokens", spec=CustomerConfig, required=False,
                                      label="Customer max tokens")
    # The page suggests memory (the spec's default, for API callers, is none).
    memory_mode = _spec_field(forms.ChoiceField, "memory_mode", choices=memory_layer_choices, initial=MemoryKind.MEMORB,
                              label="Memory")
    # Layer fields are optional: the page does not post those the chosen layer does not use.
    memory_k = _spec_field(forms.IntegerField, "memory_k", label="k", required=False,
                           help_text="Memories retrieved per query: Orbs for MemOrb, past messages or dialogues for naive RAG.")
    external_url = _spec_field(forms.CharField, "external_url", required=False, label="External memory service URL",
                               help_text="Memory “external”: the base URL of a service that speaks memweb's memory-layer "
                                         "contract (docs/MEMORY_LAYERS.md).",
                               widget=forms.URLInput(attrs={"placeholder": "http://memory.example:8400/"}))
    # Never rendered back: a page shown again after a refusal asks for the key again.
    external_key = _spec_field(forms.CharField, "external_key", required=False, label="External memory service key",
                               widget=forms.PasswordInput(render_value=False),
                               help_text="Sent as a Bearer token; kept apart from the run's settings, never shown or "
                                         "exported.")
    approved_only = _spec_field(forms.BooleanField, "approved_only", required=False, label="Approved memories only")
    same_customer_only = _spec_field(forms.BooleanField, "same_customer_only", required=False,
                                     label="Same-customer filter",
                                     help_text="Only Orbs from the customer's own episodes. Not the paper's "
                                               "no-cross-user ablation: that is the k = 1 preset.")
    reflection_style = _spec_field(forms.ChoiceField, "reflection_style", choices=ReflectionStyle.choices,
                                   required=False, label="Reflection")
    reflection_input = _spec_field(forms.ChoiceField, "reflection_input", choices=ReflectionInput.choices,
                                   required=False, label="Reflection input",
                                   help_text="Oracle adds a diagnosis against the gold answer: it leaks the answer "
                                             "key into memory, so label its results as such.")
    preset = _spec_field(forms.ChoiceField, "preset", required=False, label="Paper ablation preset",
                         choices=_choices(RunPreset.choices, "none: the settings below"),
                         help_text="Sets memory and k or the reflection style as the paper's ablation does.")
    per_turn = _spec_field(forms.BooleanField, "per_turn", required=False, label="Retrieve before every turn",
                           help_text="Off: once per episode, before the first answer.")
    memory_effects = _spec_field(forms.BooleanField, "memory_effects", required=False,
                                 label="Measure each memory's effect",
                                 help_text="Effect measurement: retrieved Orbs and experiences are withheld at random, "
                                           "so this run's memory arm sees fewer memories than a plain one. Off for "
                                           "runs meant to be compared.")
    withhold_probability = _spec_field(forms.FloatField, "withhold_probability", required=False,
                                       label="Withhold probability",
                                       help_text="Effect measurement only: chance that a retrieved Orb is kept out of "
                                                 "an episode's prompt (decided once per episode and Orb from the "
                                                 "seed); 0 with effect measurement on means 0.2.")
    bank_source = forms.ModelChoiceField(queryset=banks_all(), to_field_name="slug", required=False,
                                         empty_label="a fresh, empty bank", label="Start from",
                                         help_text="The run works on its own copy; the source is never changed.")
    evaluation_mode = _spec_field(forms.ChoiceField, "evaluation_mode", choices=EvaluationMode.choices,
                                  required=False, label="Measure",
                                  help_text="Replayed tasks measure learning on the tasks memory saw; held-out tasks "
                                            "measure transfer to tasks memory never learnt from.")
    split_rule = _spec_field(forms.ChoiceField, "split_rule", choices=SplitRule.choices, required=False,
                             label="Held-out split")
    test_fraction = _spec_field(forms.FloatField, "test_fraction", required=False, label="Test fraction")
    train_trials = _spec_field(forms.IntegerField, "train_trials", required=False, label="Train trials (epochs)")
    trials = _spec_field(forms.IntegerField, "trials",
                         help_text=f"1 to {MAX_TRIALS}; memory is never reset between trials.")
    pass_k = _spec_field(forms.IntegerField, "pass_k", required=False, label="Pass^k up to",
                         help_text="Optional; at most the trials.")
    seed = _spec_field(forms.IntegerField, "seed")
    max_turns = _spec_field(forms.IntegerField, "max_turns", label="Max turns")
    concurrency = _spec_field(forms.IntegerField, "concurrency",
                              help_text=f"Episodes queued at once (1 to {MAX_CONCURRENCY}).")
    dmrm_alpha = _dmrm_field(forms.FloatField, "alpha", label="DMRM α")
    dmrm_gamma = _dmrm_field(forms.FloatField, "gamma", label="DMRM γ")
    dmrm_c_max = _dmrm_field(forms.IntegerField, "c_max", label="DMRM C_max (tokens)")
    dmrm_c_max_rule = _dmrm_field(forms.ChoiceField, "c_max_rule", choices=CMaxRule.choices,
                                  label="DMRM C_max when empty")
    dmrm_n_success = _dmrm_field(forms.IntegerField, "n_success", label="DMRM n")
    dmrm_suppression_mode = _dmrm_field(forms.ChoiceField, "suppression_mode", choices=Suppression.choices,
                                        label="DMRM suppression")
    dmrm_source_weight = _dmrm_field(forms.FloatField, "source_weight", label="DMRM source weight")
    dmrm_min_similarity = _dmrm_field(forms.FloatField, "min_similarity", label="DMRM minimum similarity")
    dmrm_state_match = _dmrm_field(forms.ChoiceField, "state_match", choices=StateMatch.choices,
                                   label="DMRM successor state match")
    dmrm_state_similarity = _dmrm_field(forms.FloatField, "state_similarity", label="DMRM state similarity")
    dmrm_write_timing = _dmrm_field(forms.ChoiceField, "write_timing", choices=DMRMWriteTiming.choices,
                                    label="DMRM target memory written")
    review_gate = _spec_field(forms.ChoiceField, "review_gate", choices=ReviewGate.choices, label="Review gate",
                              required=False)
    feedback_enabled = _spec_field(forms.BooleanField, "feedback_enabled", required=False,
                                   label="Simulated user feedback",
                                   help_text="Each episode gets the simulated customer's critique, score and action.")
    feedback_memory = _spec_field(forms.ChoiceField, "feedback_memory", choices=FeedbackMemory.choices,
                                  required=False, label="Feedback into memory",
                                  help_text="With feedback and MemOrb memory: on-policy writes each trial's Orbs "
                                            "with its users' feedback, so the next trial plays against it.")
    feedback_rounds = _spec_field(forms.IntegerField, "feedback_rounds", required=False, label="Feedback rounds",
                                  help_text="1 to 3 (MemoryBench: up to 3): after each critique but the last, "
                                            "while the user goes on, the agent answers it and the user judges the answer.")
    feedback_calibration = _spec_field(forms.ChoiceField, "feedback_calibration", choices=FeedbackCalibration.choices,
                                       required=False, label="Feedback calibrated on",
                                       help_text="Reference: like rates can rank runs. Realised: each trial is "
                                                 "calibrated on the run's earlier scores, so every run likes at the "
                                                 "target rate.")

    def __init__(self, *args, workspace, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["task_set"].queryset = TaskSet.objects.of(workspace)
        self.fields["bank_source"].queryset = banks_all(workspace=workspace)
        self.generic_names = [name for name in _spec_settings() if name not in self.fields]
        for name in self.generic_names:
            self.fields[name] = _generic_field(name)
        for name, setting in _LAYER_SETTINGS.items():  # the page shows a field only for the layers using it
            self.fields[name].used_by = " ".join(layer.name for layer in _layers_using(setting))

    @property
    def layer_groups(self) -> list[dict]:
        """The memory section's groups of layer-dependent fields, each saying which layers use it."""
        groups = []
        for title, names in _LAYER_GROUPS:
            layers = {layer.name: layer for name in names for layer in _layers_using(_LAYER_SETTINGS[name])}
            groups.append({"title": title, "used_by": _layers_text(list(layers.values())),
                           "fields": [self[name] for name in names]})
        return groups

    @property
    def preset_layers(self) -> dict:
        """Preset -> the memory layer it sets, so the page shows that layer's fields once one is chosen."""
        return {preset: fields["memory_mode"] for preset, fields in PRESETS.items() if "memory_mode" in fields}

    @property
    def error_summary(self) -> list[dict]:
        """Every problem of a refused launch, in page order, with the field (id and label) it is on."""
        rows = [{"id": None, "label": "", "message": message} for message in self.non_field_errors()]
        return rows + [{"id": self[name].id_for_label, "label": self[name].label, "message": message}
                       for name in self.fields if name in self.errors for message in self.errors[name]]

    @property
    def generic_fields(self) -> list:
        """The spec's settings this form has no hand-made field for: a new setting shows up here."""
        return [self[name] for name in self.generic_names]

    def spec(self) -> dict:
        """The run spec from the fields that cleaned: a field in error is left out (its default stands
        in), so the launch checks still look at the rest and every problem shows in one answer. A
        field left empty takes the spec's default (as a field an older page did not post)."""
        data = self.cleaned_data
        layer = _chosen_layer(data)
        # Settings the chosen layer does not use are left out: without JavaScript the page shows them all.
        unused = layer.unused_settings() if layer else frozenset()
        given = {name: data[name] for name in _spec_settings()
                 if data.get(name) not in (None, "") and name not in unused}
        # A preset sets its own fields: the page's values for them are left out rather than refused.
        preset_fields = PRESETS.get(data.get("preset"), {})
        return {**{name: value for name, value in given.items() if name not in preset_fields},
                **self._dmrm(data, layer), **self._trials_in_error(),
                "task_set": data["task_set"].name if data.get("task_set") else "",
                "task_ids": [part for part in data.get("task_ids", "").replace(",", " ").split() if part],
                "agent": self._agent(data), "customer": self._customer(data),
                "bank_source": data["bank_source"].slug if data.get("bank_source") and "bank_source" not in unused
                else ""}

    def _trials_in_error(self) -> dict:
        """Trials the form refused, as typed: the launch then knows them at fault and checks Pass^k
        against nothing else (their default is not what was asked for)."""
        return {"trials": self.data.get("trials", "")} if "trials" in self.errors else {}

    @staticmethod
    def _agent(data: dict) -> dict:
        backend = data.get("agent", AgentBackend.SCRIPTED)
        rates = {kind: data[kind] for kind in ERROR_KINDS if data.get(kind)}
        return {"backend": backend, **_capped(data.get("agent_max_tokens")),
                **_windowed(data.get("agent_context_tokens")),
                **({"error_rates": rates} if backend == AgentBackend.SCRIPTED else {})}

    @staticmethod
    def _customer(data: dict) -> dict:
        return {**({"backend": data["customer"]} if "customer" in data else {}),
                **_capped(data.get("customer_max_tokens"))}

    @staticmethod
    def _dmrm(data: dict, layer) -> dict:
        if layer is None or not layer.uses_dmrm_params:
            return {}
        preset_fields = PRESETS.get(data.get("preset"), {})  # the preset's own DMRM values stand
        given = {name: data.get(f"dmrm_{name}") for name in DMRMParams.model_fields if f"dmrm.{name}" not in preset_fields}
        return {"dmrm": {name: value for name, value in given.items() if value not in (None, "")}}

    @staticmethod
    def _field_of(problem_field: str) -> str:
        """The form field showing a launch problem: "agent.error_rates.wrong_tool" -> "wrong_tool",
        "dmrm.alpha" -> "dmrm_alpha", "agent.backend" -> "agent"."""
        if problem_field.startswith("agent.error_rates"):
            return problem_field.split(".")[-1]
        if problem_field.startswith(("dmrm.", "agent.max_tokens", "agent.context_tokens", "customer.max_tokens")):
            return problem_field.replace(".", "_")
        return problem_field.split(".")[0]

    def add_launch_errors(self, error: RunLaunchError) -> None:
        """Each launch problem on its field; a field with an error of its own keeps only that one."""
        for field, message in error.problems:
            name = self._field_of(field)
            if name in self.fields and name in self.errors:
                continue
            self.add_error(name if name in self.fields else None, message if name in self.fields
                           else f"{field}: {message}")


class RunFilterForm(forms.Form):
    status = forms.ChoiceField(required=False, choices=_choices(EvaluationRun.Status.choices, "any status"))
    memory_mode = forms.ChoiceField(required=False, choices=lambda: _choices(memory_layer_choices(), "any memory"),
                                    label="Memory")
    agent_backend = forms.ChoiceField(required=False, label="Agent", choices=[
        ("", "any agent"), (AgentBackend.SCRIPTED, "scripted"), (AgentBackend.LLM, "LLM"),
        ("external", "external (imported)")])
    q = forms.CharField(required=False, max_length=200, label="Search",
                        widget=forms.TextInput(attrs={"type": "search", "placeholder": "name, bank, #id"}))

    def filters(self) -> dict:
        if not self.is_valid():
            return {}
        return {name: self.cleaned_data[name] for name in ("status", "memory_mode", "agent_backend", "q")}


class RunImportForm(forms.Form):
    file = forms.FileField(label="Run JSON", help_text="A file from a run's “Export JSON”, from this or another memweb.")

    def clean_file(self) -> dict:
        upload = self.cleaned_data["file"]
        if upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError(f"The file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB.")
        try:
            data = json.loads(upload.read().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise forms.ValidationError(f"The file is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise forms.ValidationError("The file must hold one JSON object, as “Export JSON” writes it.")
        return data


class RunPlanForm(forms.Form):
    """The planner beside the launch form: the effect to detect, and the launch form's own task
    selection fields (sent along with htmx's hx-include)."""

    effect = forms.FloatField(min_value=0.1, max_value=100, label="Effect to detect (points)",
                              help_text="The smallest success difference a comparison with this run should find.")
    task_set = forms.CharField(required=False, max_length=100)
    domain = forms.CharField(required=False, max_length=16)
    split = forms.CharField(required=False, max_length=8)
    task_ids = forms.CharField(required=False)

    def plan_arguments(self) -> dict:
        data = self.cleaned_data
        return {"task_set": data["task_set"], "effect": data["effect"] / 100, "domain": data["domain"],
                "split": data["split"], "task_ids": [p for p in data["task_ids"].replace(",", " ").split() if p]}


class FeedbackCurveForm(forms.Form):
    """The run page's off-policy learning-curve launcher."""

    batch_size = forms.IntegerField(min_value=1, required=False, label="Feedback logs per batch",
                                    help_text="Empty: the run's task count (one trial's logs per batch).")


class _EpisodeTargetForm(forms.Form):
    """Where a run's (or an episode's) episodes go: an existing target or a new one by name, not both."""

    which = forms.ChoiceField(choices=SELECTIONS, required=False, initial="failing", label="Episodes")
    trial = forms.IntegerField(min_value=1, required=False, label="Trial")
    existing_field, new_field, noun = "", "", ""

    def clean(self):
        cleaned = super().clean()
        existing, new = cleaned.get(self.existing_field), (cleaned.get(self.new_field) or "").strip()
        if not existing and not new:
            self.add_error(self.existing_field, f"choose a {self.noun}, or name a new one")
        elif existing and new:
            self.add_error(self.new_field, f"either choose a {self.noun} or name a new one, not both")
        if cleaned.get("which") == "trial" and cleaned.get("trial") is None:
            self.add_error("trial", "give the trial's number")
        return cleaned

    def problems(self) -> str:
        return "; ".join(f"{self.fields[name].label if name in self.fields else name}: {' '.join(errors)}"
                         for name, errors in self.errors.items())


class CampaignTargetForm(_EpisodeTargetForm):
    campaign = forms.TypedChoiceField(coerce=int, required=False, empty_value=None, label="Campaign")
    new_campaign = forms.CharField(required=False, max_length=200, label="or a new campaign")
    existing_field, new_field, noun = "campaign", "new_campaign", "campaign"

    def __init__(self, *args, workspace, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["campaign"].choices = [("", "choose…"), *(
            (campaign.pk, f"{campaign.name} ({campaign.get_status_display().lower()})")
            for campaign in campaigns_addable(workspace=workspace))]


class TaskSetTargetForm(_EpisodeTargetForm):
    task_set = forms.ChoiceField(required=False, label="Task set")
    new_task_set = forms.CharField(required=False, max_length=100, label="or a new task set")
    existing_field, new_field, noun = "task_set", "new_task_set", "task set"

    def __init__(self, *args, workspace, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["task_set"].choices = [("", "choose…"), *(
            (name, name) for name in TaskSet.objects.of(workspace).filter(is_builtin=False)
            .values_list("name", flat=True))]

    @property
    def task_set_name(self) -> str:
        return self.cleaned_data["task_set"] or self.cleaned_data["new_task_set"].strip()
