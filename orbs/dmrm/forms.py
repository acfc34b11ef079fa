"""Forms of the DMRM pages: browser filters, review, per-bank settings, the source builder."""
from django import forms
from django.db.models import Q

from orbs.dmrm.models import DMRMSettings, Experience
from orbs.models import MemoryBank

DOMAINS = (("clothing", "clothing"), ("appliances", "appliances"))


class ExperienceFilterForm(forms.Form):
    bank = forms.ModelChoiceField(MemoryBank.objects.all(), required=False, to_field_name="slug",
                                  empty_label="all banks")
    memory = forms.ChoiceField(choices=[("", "both memories"), *Experience.Memory.choices], required=False)
    status = forms.ChoiceField(choices=[("", "any status"), *Experience.Status.choices], required=False)
    domain = forms.CharField(required=False, max_length=64)
    task = forms.CharField(required=False, max_length=200, label="Task / trajectory")
    min_reward = forms.FloatField(required=False, label="Reward ≥")
    max_reward = forms.FloatField(required=False, label="Reward ≤")
    min_q = forms.FloatField(required=False, label="Q ≥")
    max_q = forms.FloatField(required=False, label="Q ≤")
    experience = forms.IntegerField(required=False, min_value=1, label="Experience #")
    flagged = forms.BooleanField(required=False, label="Flagged as harmful only")

    def __init__(self, *args, workspace, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["bank"].queryset = MemoryBank.objects.of(workspace)

    LOOKUPS = {"experience": "pk", "bank": "bank", "memory": "memory", "status": "status", "domain": "domain",
               "min_reward": "reward__gte", "max_reward": "reward__lte",
               "min_q": "q_value__gte", "max_q": "q_value__lte"}

    def filtered(self, queryset):
        """The experiences matching the filters; deleted ones only when the status filter asks for them.
        Refused filters match nothing (the page says why) rather than everything."""
        if self.errors:
            return queryset.none()
        if not self.is_bound:
            return queryset.exclude(status=Experience.Status.DELETED)
        for name, lookup in self.LOOKUPS.items():
            value = self.cleaned_data.get(name)
            if value not in (None, ""):
                queryset = queryset.filter(**{lookup: value})
        if self.cleaned_data.get("status") != Experience.Status.DELETED:
            queryset = queryset.exclude(status=Experience.Status.DELETED)
        if self.cleaned_data.get("flagged"):
            queryset = queryset.filter(flagged_at__isnull=False)
        task = self.cleaned_data.get("task")
        if task:
            queryset = queryset.filter(Q(task_ref__icontains=task) | Q(trajectory_id__icontains=task))
        return queryset


class ReviewForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approved", "approve"), ("rejected", "reject"), ("deleted", "delete"),
                                          ("restored", "restore")])
    version = forms.IntegerField(min_value=1)
    note = forms.CharField(required=False, max_length=2000, label="Reason")


LEARNING_FIELDS = ("alpha", "gamma", "c_max", "n_success", "suppression_mode", "source_weight", "scan_limit",
                   "min_similarity", "state_match", "state_similarity")
# The review gate is the reviewers' to set, as a bank's approval policy is (operators set learning).
GATE_FIELDS = ("review_api_writes",)


class DMRMSettingsForm(forms.ModelForm):
    class Meta:
        model = DMRMSettings
        fields = LEARNING_FIELDS + GATE_FIELDS
        labels = {"alpha": "α (learning rate)", "gamma": "γ (discount)", "c_max": "C_max (tokens)",
                  "n_success": "n (successful trajectories)", "min_similarity": "Minimum similarity",
                  "state_match": "Successor state match", "state_similarity": "State similarity",
                  "review_api_writes": "API-written experiences wait for review"}

    def __init__(self, *args, operator: bool = True, reviewer: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        kept = (LEARNING_FIELDS if operator else ()) + (GATE_FIELDS if reviewer else ())
        for name in [name for name in self.fields if name not in kept]:
            del self.fields[name]


class SourceBuildForm(forms.Form):
    name = forms.CharField(max_length=100, required=False, help_text="Needed to build; not for the preview.")
    source_domain = forms.ChoiceField(choices=DOMAINS, help_text="Finished episodes of this domain are read.")
    min_reward = forms.FloatField(initial=1.0, help_text="Keep episodes that succeeded or reached this reward.")
    min_q = forms.FloatField(initial=0.0, help_text="Keep steps whose discounted return reaches this.")
    gamma = forms.FloatField(initial=0.9, min_value=0.0, max_value=1.0)
