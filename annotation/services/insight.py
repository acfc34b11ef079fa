"""What an operator reads about the people of a campaign: the items they split on, and how many
judgments each of them makes per day."""
from collections import defaultdict
from datetime import date, timedelta

from django.db.models.functions import TruncDate

from annotation.models import Campaign, Judgment
from annotation.services.allocation import assignments_counted


def disagreements_list(*, campaign: Campaign) -> list[dict]:
    """Scored items with two or more counted judgments whose votes differ on at least one
    criterion, most split criteria first; each criterion with every annotator's vote."""
    votes = defaultdict(list)
    judgments = (Judgment.objects.filter(assignment__in=assignments_counted(campaign), assignment__campaign=campaign,
                                         assignment__item__is_gold=False, assignment__item__is_attention=False)
                 .order_by("pk").values_list("assignment__item_id", "assignment__item__source_ref",
                                             "assignment__annotator__username", "preferences"))
    for item_id, source_ref, annotator, preferences in judgments:
        votes[(item_id, source_ref)].append((annotator, preferences))
    rows = [_disagreement(campaign, item_id, source_ref, item_votes)
            for (item_id, source_ref), item_votes in votes.items() if len(item_votes) >= 2]
    rows = [row for row in rows if row["split"]]
    return sorted(rows, key=lambda row: (-row["split"], row["item_id"]))


def _disagreement(campaign: Campaign, item_id: int, source_ref: str, votes: list[tuple[str, dict]]) -> dict:
    criteria = []
    for criterion in campaign.criteria:
        chosen = [(annotator, preferences.get(criterion["key"], "")) for annotator, preferences in votes]
        labels = {label for _, label in chosen}
        criteria.append({"key": criterion["key"], "label": criterion["label"], "split": len(labels) > 1, "votes": chosen,
                         "counts": sorted((label, sum(1 for _, own in chosen if own == label)) for label in labels)})
    return {"item_id": item_id, "source_ref": source_ref, "judgments": len(votes), "criteria": criteria,
            "split": sum(1 for criterion in criteria if criterion["split"])}


def annotator_throughput(*, campaign: Campaign) -> dict:
    """Judgments per calendar day (server time zone) per annotator, every day from the first
    judgment to the last, so quiet days show as zeros."""
    counts = defaultdict(lambda: defaultdict(int))
    for annotator, day in (Judgment.objects.filter(assignment__campaign=campaign)
                           .annotate(day=TruncDate("created_at"))
                           .values_list("assignment__annotator__username", "day")):
        counts[annotator][day] += 1
    if not counts:
        return {"days": [], "annotators": []}
    first = min(day for per_day in counts.values() for day in per_day)
    last = max(day for per_day in counts.values() for day in per_day)
    days = _days(first, last)
    return {"days": [day.isoformat() for day in days],
            "annotators": [{"annotator": name, "counts": [counts[name][day] for day in days],
                            "total": sum(counts[name].values())} for name in sorted(counts)]}


def _days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=offset) for offset in range((last - first).days + 1)]
