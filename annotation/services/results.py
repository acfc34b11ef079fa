"""Campaign results: agreement, win rates, breakdowns, annotators, sampling.

Win rates count every judgment of a non-gold item; Fleiss' kappa uses only the
items that have all N judgments (kappa needs the same number of raters per
item). Gold (attention) items only feed each annotator's gold accuracy.
"""
from collections import Counter, defaultdict

from annotation import metrics
from annotation.models import Assignment, Campaign, FeedbackTask, Item, Judgment

BREAKDOWNS = (("language", "Language"), ("task_format", "Task format"), ("domain", "Domain"))


def judgment_rows(*, campaign: Campaign) -> list[dict]:
    """Every judgment with its item's metadata, as plain dicts."""
    return list(
        Judgment.objects.filter(assignment__campaign=campaign).order_by("pk").values(
            "pk", "preferences", "choices", "comment", "time_spent_ms", "created_at",
            "assignment__side_a_is_human", "assignment__assigned_at", "assignment__opened_at",
            "assignment__completed_at", "assignment__annotator__username", "assignment__item_id",
            "assignment__item__source_ref", "assignment__item__language", "assignment__item__task_format",
            "assignment__item__domain", "assignment__item__is_gold", "assignment__item__gold_expected",
        )
    )


def criterion_stats(*, campaign: Campaign, rows: list[dict]) -> list[dict]:
    """Kappa and win rates per criterion over the given judgment rows."""
    by_item = defaultdict(list)
    for row in rows:
        by_item[row["assignment__item_id"]].append(row["preferences"])
    complete = [prefs for prefs in by_item.values() if len(prefs) == campaign.annotators_per_item]
    stats = []
    for criterion in campaign.criteria:
        key = criterion["key"]
        stats.append({
            "criterion": key,
            "label": criterion["label"],
            "kappa": _kappa(complete, key, campaign),
            "kappa_items": len(complete),
            "items": len(by_item),
            "win": metrics.win_rates(row["preferences"][key] for row in rows).as_dict(),
        })
    return stats


def _kappa(complete: list[list[dict]], key: str, campaign: Campaign) -> float | None:
    if not complete or campaign.annotators_per_item < 2:
        return None
    labels = [[prefs[key] for prefs in item] for item in complete]
    return metrics.fleiss_kappa(metrics.counts_from_labels(labels, campaign.categories))


def breakdown(*, campaign: Campaign, rows: list[dict], field: str) -> list[dict]:
    groups = defaultdict(list)
    for row in rows:
        groups[row[f"assignment__item__{field}"]].append(row)
    return [{"group": group, "criteria": criterion_stats(campaign=campaign, rows=groups[group])}
            for group in sorted(groups)]


def annotator_stats(*, campaign: Campaign, rows: list[dict]) -> list[dict]:
    """Per annotator: judgments, agreement with each item's majority (items with
    all N judgments and a strict majority; the annotator's own vote counts),
    median active seconds per judgment, and gold accuracy."""
    majorities = _majorities(campaign, [row for row in rows if not row["assignment__item__is_gold"]])
    people = defaultdict(list)
    for row in rows:
        people[row["assignment__annotator__username"]].append(row)
    return [_annotator_row(name, people[name], majorities) for name in sorted(people)]


def _majorities(campaign: Campaign, rows: list[dict]) -> dict[tuple[int, str], str | None]:
    by_item = defaultdict(list)
    for row in rows:
        by_item[row["assignment__item_id"]].append(row["preferences"])
    return {
        (item_id, key): metrics.majority_label([prefs[key] for prefs in prefs_list])
        for item_id, prefs_list in by_item.items() if len(prefs_list) == campaign.annotators_per_item
        for key in campaign.criterion_keys
    }


def _annotator_row(name: str, rows: list[dict], majorities: dict) -> dict:
    pairs = [(own, majorities[(row["assignment__item_id"], key)])
             for row in rows for key, own in row["preferences"].items()
             if (row["assignment__item_id"], key) in majorities]
    agreed, compared = metrics.majority_agreement(pairs)
    gold_right, gold_total = _gold_score(rows)
    seconds = [row["time_spent_ms"] / 1000 for row in rows]
    return {
        "annotator": name, "judgments": len(rows), "agreed": agreed, "compared": compared,
        "agreement": agreed / compared if compared else None,
        "median_seconds": metrics.median_or_none(seconds),
        "gold_correct": gold_right, "gold_total": gold_total,
    }


def _gold_score(rows: list[dict]) -> tuple[int, int]:
    checks = [row["preferences"].get(key) == expected
              for row in rows if row["assignment__item__is_gold"]
              for key, expected in row["assignment__item__gold_expected"].items()]
    return sum(checks), len(checks)


def sampling_table(*, campaign: Campaign) -> dict:
    """How the campaign's items spread over language, task format and domain."""
    items = list(campaign.items.filter(is_gold=False).values("language", "task_format", "domain"))
    table = {"by": [{"field": field, "label": label, "counts": sorted(Counter(item[field] for item in items).items())}
                    for field, label in BREAKDOWNS]}
    languages = sorted({item["language"] for item in items})
    crossed = Counter((item["language"], item["task_format"]) for item in items)
    table["language_by_format"] = {
        "formats": list(Item.TaskFormat.values),
        "rows": [{"language": lang, "counts": [crossed[(lang, fmt)] for fmt in Item.TaskFormat.values]}
                 for lang in languages],
    }
    table["total"] = len(items)
    table["gold"] = campaign.items.filter(is_gold=True).count()
    return table


def campaign_progress(*, campaign: Campaign) -> dict:
    items = campaign.items.all()
    ready = items.exclude(human_feedback="").count()
    done = Assignment.objects.filter(campaign=campaign, status=Assignment.Status.COMPLETED).count()
    needed = items.count() * campaign.annotators_per_item
    tasks = Counter(FeedbackTask.objects.filter(campaign=campaign).values_list("status", flat=True))
    return {
        "items": items.count(), "items_ready": ready, "judgments_done": done, "judgments_needed": needed,
        "judgments_in_progress": Assignment.objects.filter(
            campaign=campaign, status=Assignment.Status.ASSIGNED).count(),
        "feedback_open": tasks[FeedbackTask.Status.OPEN], "feedback_in_progress": tasks[FeedbackTask.Status.ASSIGNED],
        "feedback_done": tasks[FeedbackTask.Status.DONE],
        "percent": round(100 * done / needed) if needed else 0,
    }


def campaign_results(*, campaign: Campaign) -> dict:
    """Everything the results page, its charts, the exports and the API show."""
    rows = judgment_rows(campaign=campaign)
    scored = [row for row in rows if not row["assignment__item__is_gold"]]
    return {
        "campaign": {"id": campaign.pk, "name": campaign.name, "annotators_per_item": campaign.annotators_per_item,
                     "allow_ties": campaign.allow_ties, "criteria": campaign.criteria},
        "progress": campaign_progress(campaign=campaign),
        "overall": criterion_stats(campaign=campaign, rows=scored),
        "breakdowns": [{"field": field, "label": label,
                        "groups": breakdown(campaign=campaign, rows=scored, field=field)}
                       for field, label in BREAKDOWNS],
        "annotators": annotator_stats(campaign=campaign, rows=rows),
        "sampling": sampling_table(campaign=campaign),
    }
