"""Judgments and results as flat records, written as CSV or JSONL (operators only:
these files say which side was human)."""
import csv
import io
import json

from annotation.models import Campaign
from annotation.services.adjudication import final_labels
from annotation.services.quality import excluded_ids
from annotation.services.results import campaign_results, judgment_rows

FORMATS = ("csv", "jsonl")
# Spreadsheets run cells starting with these as formulas.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def judgment_records(*, campaign: Campaign) -> list[dict]:
    records = []
    excluded = excluded_ids(campaign=campaign)
    finals = final_labels(campaign=campaign)
    for row in judgment_rows(campaign=campaign):
        decided = finals.get(row["assignment__item_id"], {})
        record = {
            "judgment_id": row["pk"], "item_id": row["assignment__item_id"],
            "source_ref": row["assignment__item__source_ref"], "language": row["assignment__item__language"],
            "task_format": row["assignment__item__task_format"], "domain": row["assignment__item__domain"],
            "is_gold": row["assignment__item__is_gold"], "is_attention": row["assignment__item__is_attention"],
            "annotator": row["assignment__annotator__username"],
            "annotator_excluded": row["assignment__annotator_id"] in excluded,
            "side_a": "human" if row["assignment__side_a_is_human"] else "simulated",
            "score": row["score"], "action": row["action"],
        }
        for key in campaign.criterion_keys:
            record[f"{key}_choice"] = row["choices"].get(key)
            record[f"{key}_preferred"] = row["preferences"].get(key)
            # The lead's final label for the item, where they settled a disagreement on this criterion.
            record[f"{key}_final"] = decided[key].label if key in decided else ""
        record.update(_timing(row), comment=row["comment"])
        records.append(record)
    return records


def _timing(row: dict) -> dict:
    started = row["assignment__opened_at"] or row["assignment__assigned_at"]
    finished = row["assignment__completed_at"]
    return {
        "time_spent_ms": row["time_spent_ms"],
        "server_seconds": round((finished - started).total_seconds(), 3) if finished else None,
        "assigned_at": row["assignment__assigned_at"].isoformat(),
        "completed_at": finished.isoformat() if finished else None,
    }


def result_records(*, campaign: Campaign) -> list[dict]:
    """One record per (scope, group, criterion): overall, then each breakdown."""
    results = campaign_results(campaign=campaign)
    records = [_result_record("overall", "all", stats) for stats in results["overall"]]
    for breakdown in results["breakdowns"]:
        for group in breakdown["groups"]:
            records.extend(_result_record(breakdown["field"], group["group"], stats) for stats in group["criteria"])
    return records


def _result_record(scope: str, group: str, stats: dict) -> dict:
    win = stats["win"]
    return {
        "scope": scope, "group": group, "criterion": stats["criterion"], "kappa": stats["kappa"],
        "kappa_items": stats["kappa_items"], "alpha": stats["alpha"], "judgments": win["total"],
        "simulated_wins": win["simulated"],
        "human_wins": win["human"], "ties": win["ties"], "simulated_rate": win["simulated_rate"],
        "human_rate": win["human_rate"], "tie_rate": win["tie_rate"],
        "simulated_vs_human": win["simulated_vs_human"],
    }


def records_render(records: list[dict], fmt: str) -> str:
    if fmt == "jsonl":
        return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    if fmt != "csv":
        raise ValueError(f"format must be one of {FORMATS}")
    buffer = io.StringIO()
    if records:
        writer = csv.DictWriter(buffer, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows({key: _cell(value) for key, value in record.items()} for record in records)
    return buffer.getvalue()


def _cell(value):
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value
