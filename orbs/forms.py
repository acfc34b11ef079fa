"""Forms of the review pages; each error names its field."""
from django import forms

from memweb.roles import Role, has_role
from orbs.backends.emotion import LABELS
from orbs.models import MemoryBank, Orb, Source
from orbs.services.banks import APPROVAL_FIELDS, SETTABLE_FIELDS
from orbs.services.queue import OrbFilters, orb_domains

APPROVAL_LOCKED = "Set by a reviewer: it decides which memories skip review."
OPERATOR_LOCKED = "Set by an operator."


class VersionForm(forms.Form):
    expected_version = forms.IntegerField(min_value=1, widget=forms.HiddenInput)


class ApproveForm(VersionForm):
    note = forms.CharField(required=False, max_length=2000)


class RejectForm(VersionForm):
    reason = forms.CharField(max_length=2000, error_messages={"required": "Give a reason to reject this Orb."})


class ProposalDecisionForm(forms.Form):
    """Accept or reject an agent's proposal; the note is required to reject (the service says so)."""
    decision = forms.ChoiceField(choices=[("accept", "accept"), ("reject", "reject")])
    note = forms.CharField(required=False, max_length=2000)


class MergeForm(VersionForm):
    into_id = forms.IntegerField(min_value=1, label="Orb to keep",
                                 error_messages={"required": "choose the Orb to keep", "invalid": "choose the Orb to keep"})
    note = forms.CharField(required=False, max_length=2000, label="Review note")


def _orb_version_pair(value: str) -> tuple[int, int]:
    orb_id, _, version = value.partition(":")
    if not (orb_id.isdigit() and version.isdigit()):
        raise forms.ValidationError(f"Bad Orb reference {value!r}: expected id:version.")
    return int(orb_id), int(version)


class DuplicateMergeForm(forms.Form):
    """Keep one Orb of a near-duplicate group; the Orbs ticked under `merge` are folded into it."""
    keep = forms.CharField(error_messages={"required": "Choose the Orb to keep."})
    merge = forms.MultipleChoiceField(error_messages={"required": "Tick at least one Orb to merge."})
    outcome = forms.CharField(required=False, max_length=20000, label="Lesson of the kept Orb",
                              widget=forms.Textarea(attrs={"rows": 5}))
    note = forms.CharField(required=False, max_length=2000, label="Review note")

    def __init__(self, data=None, **kwargs):
        super().__init__(data, **kwargs)
        # The choices are the posted "id:version" pairs; the view checks that each is in the group.
        self.fields["merge"].choices = [(v, v) for v in (data.getlist("merge") if data else [])]

    def clean_keep(self) -> tuple[int, int]:
        return _orb_version_pair(self.cleaned_data["keep"])

    def clean_merge(self) -> list[tuple[int, int]]:
        return [_orb_version_pair(value) for value in self.cleaned_data["merge"]]


class EditForm(VersionForm):
    obs = forms.CharField(label="Observation (customer utterances)", widget=forms.Textarea(attrs={"rows": 5}))
    emotion = forms.ChoiceField(choices=[(label, label) for label in LABELS])
    outcome = forms.CharField(label="Outcome (policy reflection)", widget=forms.Textarea(attrs={"rows": 6}))
    context = forms.JSONField(label="Context (JSON)", widget=forms.Textarea(attrs={"rows": 5, "class": "mono"}))
    note = forms.CharField(required=False, max_length=2000, label="Review note")
    approve = forms.BooleanField(required=False, label="Approve this revision")

    def clean_context(self):
        context = self.cleaned_data["context"]
        if not isinstance(context, dict):
            raise forms.ValidationError("Context must be a JSON object, e.g. {\"reward\": 1.0}.")
        return context


class BulkForm(forms.Form):
    """A bulk decision on the ticked Orbs, or (`scope` "matching") on every Orb the queue's filters
    match. Both are confirmed first: the ticked ones' confirmation posts `confirmed`, the matching
    ones' carries the plan's fingerprint."""
    action = forms.ChoiceField(choices=[("approve", "approve"), ("reject", "reject")])
    selected = forms.MultipleChoiceField(required=False)
    reason = forms.CharField(required=False, max_length=2000)
    scope = forms.ChoiceField(required=False, choices=[("", "the ticked Orbs"), ("matching", "every matching Orb")])
    fingerprint = forms.CharField(required=False, max_length=64)
    confirmed = forms.BooleanField(required=False)

    def __init__(self, data=None, **kwargs):
        super().__init__(data, **kwargs)
        # The choices are whatever "id:version" pairs were posted; clean_selected checks their shape.
        self.fields["selected"].choices = [(v, v) for v in (data.getlist("selected") if data else [])]

    def clean_selected(self) -> list[tuple[int, int]]:
        pairs = []
        for value in self.cleaned_data["selected"]:
            orb_id, _, version = value.partition(":")
            if not (orb_id.isdigit() and version.isdigit()):
                raise forms.ValidationError(f"Bad selection {value!r}.")
            pairs.append((int(orb_id), int(version)))
        return pairs

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("action") == "reject" and not cleaned.get("reason", "").strip():
            self.add_error("reason", "Give a reason to reject the selected Orbs.")
        if cleaned.get("scope") != "matching" and not cleaned.get("selected") and "selected" not in self.errors:
            self.add_error("selected", "Select at least one Orb, or tick “all matching the filters”.")
        return cleaned

    @property
    def for_all_matching(self) -> bool:
        return self.cleaned_data.get("scope") == "matching"


def _choices(values, blank: str) -> list[tuple[str, str]]:
    return [("", blank)] + [(value, value) for value in values]


class QueueFilterForm(forms.Form):
    bank = forms.ChoiceField(required=False)
    status = forms.ChoiceField(required=False, choices=_choices(Orb.Status.values, "any status"))
    domain = forms.ChoiceField(required=False)
    emotion = forms.ChoiceField(required=False, choices=_choices(LABELS, "any emotion"))
    source = forms.ChoiceField(required=False, choices=[("", "any source")] + list(Source.choices))
    source_label = forms.CharField(required=False, max_length=200, label="Source run")
    q = forms.CharField(required=False, max_length=200, label="Text search")
    semantic = forms.CharField(required=False, max_length=500, label="Semantic search")
    near_duplicates = forms.BooleanField(required=False, label="Near-duplicates only")
    flagged = forms.BooleanField(required=False, label="Flagged as harmful only")

    def __init__(self, *args, workspace, **kwargs):
        super().__init__(*args, **kwargs)
        banks = MemoryBank.objects.of(workspace).order_by("name").values_list("slug", "name")
        self.fields["bank"].choices = [("", "all banks")] + list(banks)
        self.fields["domain"].choices = _choices(orb_domains(), "any domain")

    def filters(self) -> OrbFilters:
        data = self.cleaned_data if self.is_valid() else {}
        return OrbFilters(
            bank=data.get("bank", ""), status=data.get("status", ""), domain=data.get("domain", ""),
            emotion=data.get("emotion", ""), source=data.get("source", ""),
            source_label=data.get("source_label", ""), text=data.get("q", ""),
            near_duplicates=data.get("near_duplicates", False), flagged=data.get("flagged", False),
        )


class _BankScopeForm(forms.ModelForm):
    """A post without the customer scope (a form from before banks had one) keeps the bank's scope.
    `user` sets what they may: the approval policy (APPROVAL_FIELDS, the review gate) a reviewer,
    the rest an operator (admins both). A field they may not set is shown disabled and keeps its
    value whatever is posted."""

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["customer_scope"].required = False
        reviewer, operator = has_role(user, Role.REVIEWER), has_role(user, Role.OPERATOR)
        for name, field in self.fields.items():
            if not (reviewer if name in APPROVAL_FIELDS else operator):
                field.disabled = True
                field.help_text = APPROVAL_LOCKED if name in APPROVAL_FIELDS else OPERATOR_LOCKED

    def clean_customer_scope(self) -> str:
        return self.cleaned_data["customer_scope"] or self.instance.customer_scope


class BankPolicyForm(_BankScopeForm):
    class Meta:
        model = MemoryBank
        fields = SETTABLE_FIELDS
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}


class BankCreateForm(_BankScopeForm):
    class Meta:
        model = MemoryBank
        fields = ("name", *SETTABLE_FIELDS)
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}


class BankCopyForm(forms.Form):
    name = forms.CharField(max_length=100, label="Name of the copy",
                           help_text="A new bank with this bank's Orbs, history and DMRM memory.")


class ImportForm(forms.Form):
    file = forms.FileField(label="JSONL file", help_text="A file from a bank's “Export JSONL”.")
    name = forms.CharField(required=False, max_length=100, label="Import as (bank name)",
                           help_text="Leave empty to use the name in the file.")

    def __init__(self, *args, **kwargs):
        # The banks page shows this form beside the create form, whose name field would share its id.
        kwargs.setdefault("auto_id", "id_import_%s")
        super().__init__(*args, **kwargs)


class DeleteForm(VersionForm):
    reason = forms.CharField(max_length=2000, error_messages={"required": "Give a reason to delete this Orb."})


class RestoreForm(VersionForm):
    note = forms.CharField(required=False, max_length=2000)


class BankDeleteForm(forms.Form):
    """Deleting a bank is confirmed by typing its slug."""

    prefix = "delete"  # shares the bank page with the erasure form

    confirm_slug = forms.CharField(max_length=100, label="Type the bank's slug to confirm")
    reason = forms.CharField(required=False, max_length=2000)

    def __init__(self, data=None, *, bank: MemoryBank, **kwargs):
        super().__init__(data, **kwargs)
        self.bank = bank

    def clean_confirm_slug(self) -> str:
        typed = self.cleaned_data["confirm_slug"].strip()
        if typed != self.bank.slug:
            raise forms.ValidationError(f"type {self.bank.slug} exactly to delete this bank.")
        return typed


class ErasureForm(forms.Form):
    """An erasure cannot be undone, so the customer key is typed twice: a slip of the keyboard in one
    of them erases nobody."""

    prefix = "erase"

    customer_key = forms.CharField(max_length=200, label="Customer key")
    confirm_customer_key = forms.CharField(max_length=200, label="Type the customer key again to confirm")
    reason = forms.CharField(required=False, max_length=2000, label="Reason (e.g. the request's ticket)")
    every_bank = forms.BooleanField(required=False, initial=True,
                                    label="Also every other bank holding this customer (copies, runs' banks)")

    def clean(self):
        cleaned = super().clean()
        key, again = cleaned.get("customer_key", "").strip(), cleaned.get("confirm_customer_key", "").strip()
        if key and again != key:
            self.add_error("confirm_customer_key", "does not match the customer key; nothing was erased.")
        return cleaned


class CustomerLookupForm(forms.Form):
    """The customer whose timeline is shown. Posted, never put in an address: a customer key must not
    reach the access log (as with erasure)."""

    prefix = "customer"

    customer_key = forms.CharField(max_length=200, label="Customer key",
                                   error_messages={"required": "Type the customer key to look up."})
    page = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)

    def clean_customer_key(self) -> str:
        key = self.cleaned_data["customer_key"].strip()
        if not key:
            raise forms.ValidationError("Type the customer key to look up.")
        return key


class CustomerErasureForm(ErasureForm):
    """Erasure from the customer's timeline: the key looked up travels hidden and is typed once more;
    every bank of the workspace holding the customer is erased, as the timeline lists them all."""

    every_bank = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["customer_key"].widget = forms.HiddenInput()
