"""The lead settles disagreements: a final label per criterion of a disputed item, with a note.
Each decision is stored as a new row (who, when), so a changed mind leaves its history; the latest
row per item and criterion is the final label, shown with the disagreement, in the results and in
the exports. Only operators see any of it: judges never learn which side was simulated."""
from collections import Counter

from django.db import transaction

from annotation import metrics
from annotation.models import Adjudication, Campaign, Item, Judgment
from annotation.services.allocation import assignments_counted
from annotation.services.insight import disagreements_list

MAX_NOTE = 2000


class AdjudicationError(ValueError):
    """Names the field (a criterion key, or "note") and the problem."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field, self.reason = field, reason


def adjudicate(*, item: Item, labels: dict[str, str], note: str, decided_by) -> list[Adjudication]:
    """Store the lead's final label for each criterion given a label ("" leaves a criterion as it is)."""
    campaign = item.campaign
    if not item.is_scored:
        raise AdjudicationError("item", "gold items and attention checks are not adjudicated")
    chosen = _labels_validate(campaign, labels)
    note = (note or "").replace("\x00", "").strip()
    if not note:
        raise AdjudicationError("note", "say why: the note is kept with the final label")
    if len(note) > MAX_NOTE:
        raise AdjudicationError("note", f"longer than {MAX_NOTE} characters")
    with transaction.atomic():
        return [Adjudication.objects.create(campaign=campaign, item=item, criterion=key, label=label, note=note,
                                            decided_by=decided_by) for key, label in chosen.items()]


def _labels_validate(campaign: Campaign, labels: dict[str, str]) -> dict[str, str]:
    unknown = sorted(set(labels) - set(campaign.criterion_keys))
    if unknown:
        raise AdjudicationError("labels", f"no criterion {', '.join(unknown)} in this campaign "
                                          f"(its criteria: {', '.join(campaign.criterion_keys)})")
    chosen = {}
    for key in campaign.criterion_keys:
        label = labels.get(key, "")
        if label and label not in Adjudication.Label.values:
            raise AdjudicationError(key, f"choose one of {', '.join(Adjudication.Label.values)}")
        if label:
            chosen[key] = label
    if not chosen:
        raise AdjudicationError(campaign.criterion_keys[0], "choose a final label for at least one criterion")
    return chosen


def final_labels(*, campaign: Campaign) -> dict[int, dict[str, Adjudication]]:
    """{item id: {criterion: the latest adjudication}}."""
    finals: dict[int, dict[str, Adjudication]] = {}
    for decision in Adjudication.objects.filter(campaign=campaign).select_related("decided_by").order_by("pk"):
        finals.setdefault(decision.item_id, {})[decision.criterion] = decision
    return finals


def disagreements_adjudicated(*, campaign: Campaign) -> list[dict]:
    """disagreements_list with each criterion's final label (or None) beside its votes."""
    finals = final_labels(campaign=campaign)
    rows = disagreements_list(campaign=campaign)
    for row in rows:
        decided = finals.get(row["item_id"], {})
        for criterion in row["criteria"]:
            criterion["final"] = decided.get(criterion["key"])
        row["adjudicated"] = sum(1 for criterion in row["criteria"] if criterion["final"])
    return rows


def adjudication_summary(*, campaign: Campaign) -> dict:
    """For the results page: per criterion, how many items the lead settled and on which side."""
    finals = final_labels(campaign=campaign)
    counts = Counter((key, decision.label) for decided in finals.values() for key, decision in decided.items())
    return {"items": len(finals), "criteria": [
        {"key": criterion["key"], "label": criterion["label"],
         **{label: counts[(criterion["key"], label)] for label in Adjudication.Label.values}}
        for criterion in campaign.criteria]}


def final_label_records(*, campaign: Campaign) -> list[dict]:
    """One record per judged scored item: each criterion's majority of the counted votes, the final
    label (the lead's where they set one, else the majority) and the adjudication behind it."""
    votes: dict[int, list[dict]] = {}
    refs = {}
    for item_id, source_ref, preferences in (
            Judgment.objects.filter(assignment__in=assignments_counted(campaign), assignment__campaign=campaign,
                                    assignment__item__is_gold=False, assignment__item__is_attention=False)
            .order_by("pk").values_list("assignment__item_id", "assignment__item__source_ref", "preferences")):
        votes.setdefault(item_id, []).append(preferences)
        refs[item_id] = source_ref
    finals = final_labels(campaign=campaign)
    return [_final_record(campaign, item_id, refs[item_id], votes[item_id], finals.get(item_id, {}))
            for item_id in sorted(votes)]


def _final_record(campaign: Campaign, item_id: int, source_ref: str, votes: list[dict], decided: dict) -> dict:
    record = {"item_id": item_id, "source_ref": source_ref, "judgments": len(votes)}
    for key in campaign.criterion_keys:
        majority = metrics.majority_label([preferences.get(key) for preferences in votes]) or ""
        decision = decided.get(key)
        record |= {
            f"{key}_majority": majority, f"{key}_final": decision.label if decision else majority,
            f"{key}_adjudicated": decision is not None, f"{key}_note": decision.note if decision else "",
            f"{key}_decided_by": _username(decision.decided_by) if decision else "",
            f"{key}_decided_at": decision.decided_at.isoformat() if decision else "",
        }
    return record


def _username(user) -> str:
    return user.get_username() if user else ""
