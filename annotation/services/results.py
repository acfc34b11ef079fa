"""Campaign results: agreement, win rates, breakdowns, annotators, sampling.

Win rates count every judgment of a scored item, except that where the lead settled a
disagreement (adjudication) the item's votes on that criterion count as the final label: the
lead's decision replaces the item's majority, and the item keeps its weight. Agreement is between
annotators, so kappa and alpha read the votes as cast. Fleiss' kappa uses the first N
judgments of items that have at least N (kappa needs the same number of raters
per item; max-disagreement items may have more), Krippendorff's alpha uses all
of them. Intervals are percentile bootstraps over items. Gold items only feed
each annotator's gold accuracy, attention checks only their standing; excluded
annotators' judgments stay stored but leave every figure.
"""
from collections import Counter, defaultdict

from annotation import competence, fidelity, metrics
from annotation.models import Assignment, Campaign, FeedbackTask, Item, Judgment, Participant
from annotation.services.adjudication import final_labels
from annotation.services.allocation import items_with_judgment_counts
from annotation.services.quality import excluded_ids

BOOTSTRAP_REPS = 1000

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
            "assignment__item__is_attention", "assignment__annotator_id", "score", "action",
        )
    )


def _is_scored(row: dict) -> bool:
    return not (row["assignment__item__is_gold"] or row["assignment__item__is_attention"])


def criterion_stats(*, campaign: Campaign, rows: list[dict], intervals: bool = False,
                    finals: dict[int, dict[str, str]] | None = None) -> list[dict]:
    """Kappa, alpha and win rates per criterion over the given judgment rows
    (rows in pk order, so "the first N" is the first N judged). `finals`, {item id: {criterion:
    final label}}, decides the win rates of adjudicated items; agreement ignores it."""
    finals = finals or {}
    by_item = defaultdict(list)
    for row in rows:
        by_item[row["assignment__item_id"]].append(row["preferences"])
    n = campaign.annotators_per_item
    complete = [prefs[:n] for prefs in by_item.values() if len(prefs) >= n]
    stats = []
    for criterion in campaign.criteria:
        key = criterion["key"]
        kappa_units = [[prefs[key] for prefs in item] for item in complete]
        alpha_units = [[prefs[key] for prefs in item] for item in by_item.values()]
        stats.append({
            "criterion": key, "label": criterion["label"],
            "kappa": _kappa(kappa_units, campaign), "kappa_items": len(complete), "items": len(by_item),
            "alpha": metrics.krippendorff_alpha_nominal(alpha_units),
            "win": metrics.win_rates(_decided(row, key, finals) for row in rows).as_dict(),
            "adjudicated_items": sum(1 for item_id in by_item if key in finals.get(item_id, {})),
        })
        if intervals:
            stats[-1] |= _intervals(campaign, kappa_units, alpha_units)
    return stats


def _decided(row: dict, key: str, finals: dict[int, dict[str, str]]) -> str:
    """The judgment's vote on `key`, or the lead's final label where they decided the item."""
    return finals.get(row["assignment__item_id"], {}).get(key) or row["preferences"][key]


def final_label_map(*, campaign: Campaign) -> dict[int, dict[str, str]]:
    """{item id: {criterion: the lead's latest final label}}."""
    return {item_id: {key: decision.label for key, decision in decided.items()}
            for item_id, decided in final_labels(campaign=campaign).items()}


def _intervals(campaign: Campaign, kappa_units: list, alpha_units: list) -> dict:
    n, categories = campaign.annotators_per_item, campaign.categories
    kappa = (metrics.bootstrap_sums(metrics.fleiss_parts(kappa_units, categories),
                                    lambda sums: metrics.fleiss_finish(sums, n), reps=BOOTSTRAP_REPS)
             if kappa_units and n >= 2 else metrics.Interval(None, None, None, len(kappa_units)))
    alpha = metrics.bootstrap_sums(metrics.alpha_parts(alpha_units, categories), metrics.alpha_finish,
                                   reps=BOOTSTRAP_REPS)
    return {"kappa_interval": kappa.as_dict(), "alpha_interval": alpha.as_dict()}


def _kappa(units: list[list[str]], campaign: Campaign) -> float | None:
    if not units or campaign.annotators_per_item < 2:
        return None
    return metrics.fleiss_kappa(metrics.counts_from_labels(units, campaign.categories))


def breakdown(*, campaign: Campaign, rows: list[dict], field: str,
              finals: dict[int, dict[str, str]] | None = None) -> list[dict]:
    groups = defaultdict(list)
    for row in rows:
        groups[row[f"assignment__item__{field}"]].append(row)
    return [{"group": group, "criteria": criterion_stats(campaign=campaign, rows=groups[group], finals=finals)}
            for group in sorted(groups)]


def annotator_stats(*, campaign: Campaign, rows: list[dict]) -> list[dict]:
    """Per annotator: judgments, agreement with each item's majority (items with
    at least N judgments and a strict majority; the annotator's own vote counts),
    MACE competence, share of side A, spammer reasons, median active seconds,
    gold accuracy and attention-check standing. Everyone is listed, excluded or not."""
    scored = [row for row in rows if _is_scored(row)]
    majorities = _majorities(campaign, scored)
    votes = [competence.Vote(unit=f"{row['assignment__item_id']}:{key}", annotator=row["assignment__annotator__username"],
                             label=label) for row in scored for key, label in row["preferences"].items()]
    competences = competence.mace_competence(votes)
    standings = {p.annotator_id: p for p in Participant.objects.filter(campaign=campaign)}
    people = defaultdict(list)
    for row in rows:
        people[row["assignment__annotator__username"]].append(row)
    return [_annotator_row(name, people[name], majorities) | _quality(people[name], competences.get(name), standings)
            for name in sorted(people)]


def _quality(rows: list[dict], theta: float | None, standings: dict) -> dict:
    sides = [_leaning(row["choices"]) for row in rows if _is_scored(row)]
    sides = [side for side in sides if side]
    a_count = sides.count("A")
    participant = standings.get(rows[0]["assignment__annotator_id"])
    spam_reasons = competence.spammer_reasons(competence=theta, a_count=a_count, decided=len(sides))
    standing = participant.standing if participant else Participant.Standing.GOOD
    set_by_operator = bool(participant and participant.set_by_operator)
    return {
        "annotator_id": rows[0]["assignment__annotator_id"], "competence": theta,
        "side_a": a_count, "sided": len(sides), "side_a_share": a_count / len(sides) if sides else None,
        "spam_reasons": spam_reasons, "standing": standing, "set_by_operator": set_by_operator,
        "status": annotator_status(standing=standing, spam_reasons=spam_reasons, set_by_operator=set_by_operator),
        "attention_correct": participant.attention_correct if participant else 0,
        "attention_total": participant.attention_total if participant else 0,
    }


LIKELY_SPAMMER = "likely spammer"


def annotator_status(*, standing: str, spam_reasons: list[str], set_by_operator: bool) -> str:
    """The one status shown for an annotator. The attention-check standing alone would call a flagged
    spammer "good"; an exclusion, or an operator's decision, outranks the flag."""
    if standing == Participant.Standing.EXCLUDED or set_by_operator or not spam_reasons:
        return standing
    return LIKELY_SPAMMER


def _leaning(choices: dict) -> str | None:
    """The side most of a judgment's criteria chose. One judgment is one test of
    position: its criteria are read together, so counting them apart would
    overstate how much evidence an annotator's side share carries."""
    votes = list(choices.values())
    a_count, b_count = votes.count("A"), votes.count("B")
    return "A" if a_count > b_count else "B" if b_count > a_count else None


def _majorities(campaign: Campaign, rows: list[dict]) -> dict[tuple[int, str], str | None]:
    by_item = defaultdict(list)
    for row in rows:
        by_item[row["assignment__item_id"]].append(row["preferences"])
    return {
        (item_id, key): metrics.majority_label([prefs[key] for prefs in prefs_list])
        for item_id, prefs_list in by_item.items() if len(prefs_list) >= campaign.annotators_per_item
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
        "gold_accuracy": gold_right / gold_total if gold_total else None,
    }


def _gold_score(rows: list[dict]) -> tuple[int, int]:
    checks = [row["preferences"].get(key) == expected
              for row in rows if row["assignment__item__is_gold"]
              for key, expected in row["assignment__item__gold_expected"].items()]
    return sum(checks), len(checks)


def sampling_table(*, campaign: Campaign) -> dict:
    """How the campaign's items spread over language, task format and domain."""
    items = list(campaign.items.filter(is_gold=False, is_attention=False).values("language", "task_format", "domain"))
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
    table["attention"] = campaign.items.filter(is_attention=True).count()
    return table


def campaign_progress(*, campaign: Campaign) -> dict:
    items = campaign.items.all()
    ready = items.exclude(human_feedback="").count()
    # Attention checks go to everyone, outside the N per item, so they count in neither.
    counts = list(items_with_judgment_counts(campaign=campaign, items=items.filter(is_attention=False))
                  .values_list("judged", "needed"))
    done, needed = sum(judged for judged, _ in counts), sum(need for _, need in counts)
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
    excluded = excluded_ids(campaign=campaign)
    scored = [row for row in rows if _is_scored(row) and row["assignment__annotator_id"] not in excluded]
    finals = final_label_map(campaign=campaign)
    return {
        "campaign": {"id": campaign.pk, "name": campaign.name, "annotators_per_item": campaign.annotators_per_item,
                     "allow_ties": campaign.allow_ties, "criteria": campaign.criteria,
                     "assignment_strategy": campaign.assignment_strategy},
        "progress": campaign_progress(campaign=campaign),
        "overall": criterion_stats(campaign=campaign, rows=scored, intervals=True, finals=finals),
        "adjudicated_items": len({row["assignment__item_id"] for row in scored} & set(finals)),
        "position": position_bias(campaign=campaign, rows=scored),
        "excluded": len(excluded),
        "breakdowns": [{"field": field, "label": label,
                        "groups": breakdown(campaign=campaign, rows=scored, field=field, finals=finals)}
                       for field, label in BREAKDOWNS],
        "annotators": annotator_stats(campaign=campaign, rows=rows),
        "sampling": sampling_table(campaign=campaign),
        "fidelity": fidelity.fidelity_summary(conversations_compared(campaign=campaign), reps=BOOTSTRAP_REPS),
    }


def position_bias(*, campaign: Campaign, rows: list[dict]) -> list[dict]:
    """Per criterion, the share of A/B votes that chose side A, with a Wilson
    interval; sides are balanced, so anything far from 1/2 is a position bias."""
    stats = []
    for criterion in campaign.criteria:
        sides = [row["choices"][criterion["key"]] for row in rows if row["choices"].get(criterion["key"]) in ("A", "B")]
        stats.append({"criterion": criterion["key"], "label": criterion["label"],
                      "share_a": metrics.wilson_interval(sides.count("A"), len(sides)).as_dict()})
    return stats


def conversations_compared(*, campaign: Campaign) -> list[fidelity.Conversation]:
    """Scored items with the simulated user's rating and people's ratings: the
    feedback writer's and every judge's who gave one (excluded annotators left out)."""
    excluded = excluded_ids(campaign=campaign)
    people = defaultdict(list)
    for item_id, score, action in FeedbackTask.objects.filter(campaign=campaign, score__isnull=False).exclude(
            writer_id__in=excluded).values_list("item_id", "score", "action"):
        people[item_id].append((score, action))
    for item_id, score, action in Judgment.objects.filter(assignment__campaign=campaign, score__isnull=False).exclude(
            assignment__annotator_id__in=excluded).order_by("pk").values_list("assignment__item_id", "score", "action"):
        people[item_id].append((score, action))
    items = campaign.items.filter(is_gold=False, is_attention=False, pk__in=list(people)).order_by("pk")
    return [fidelity.Conversation(item.simulated_score, item.simulated_action or None,
                                  item.simulated_like_probability, tuple(people[item.pk]))
            for item in items if item.simulated_score is not None or item.simulated_action]


def campaign_action_pairs(*, campaign: Campaign) -> list[tuple[int, str]]:
    """(simulated score, people's strict-majority action) per conversation, for
    refitting the simulated user's action model to people (fidelity.action_fit)."""
    return [(conversation.simulated_score, majority) for conversation in conversations_compared(campaign=campaign)
            if conversation.simulated_score is not None
            if (majority := metrics.majority_label([action for _, action in conversation.human])) is not None]


def campaigns_with_action_pairs(*, workspace) -> list[tuple[Campaign, int]]:
    """`workspace`'s campaigns that can refit the action model, by name, each with its number of pairs."""
    candidates = Campaign.objects.of(workspace).filter(items__simulated_score__isnull=False).distinct().order_by("name")
    return [(campaign, n) for campaign in candidates if (n := len(campaign_action_pairs(campaign=campaign)))]


def campaign_action_fit(*, campaign: Campaign) -> fidelity.ActionFit | None:
    """The action model refitted to this campaign's people; None without any majority to fit."""
    pairs = campaign_action_pairs(campaign=campaign)
    return fidelity.action_fit(pairs) if pairs else None
