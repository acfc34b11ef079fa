"""Custom scores (evaluation.scores) on the pages that show a reward: the run page's card, the
episode page's values and the compare page's means per run, each drawn beside the reward."""
from django import template
from django.db.models import Avg, Count, Q

from evaluation.models import TaskSet
from evaluation.runs.models import RunEpisode
from evaluation.scores.services import (
    episode_scores,
    run_score_job_active,
    run_scores_summary,
    runs_scores_compare,
)

register = template.Library()


def _reward_of(run) -> dict:
    """Success rate and mean reward over the run's finished episodes: the columns scores sit beside."""
    done = run.run_episodes.filter(status=RunEpisode.Status.DONE)
    totals = done.aggregate(n=Count("pk"), successes=Count("pk", filter=Q(success=True)), reward=Avg("reward"))
    return {"success": totals["successes"] / totals["n"] if totals["n"] else None, "reward": totals["reward"]}


@register.inclusion_tag("evaluation/scores/_run_card.html", takes_context=True)
def run_custom_scores(context, run) -> dict:
    return {"csrf_token": context.get("csrf_token"), "run": run, "summary": run_scores_summary(run=run),
            "job": run_score_job_active(run=run),
            "task_set": run.task_set, "reward": _reward_of(run)}


@register.inclusion_tag("evaluation/scores/_episode_scores.html")
def episode_custom_scores(episode) -> dict:
    return {"episode": episode, "scores": episode_scores(episode=episode)}


@register.inclusion_tag("evaluation/scores/_compare_scores.html")
def compare_custom_scores(runs) -> dict:
    runs = list(runs)
    return {"runs": [{"run": run, **_reward_of(run)} for run in runs], "rows": runs_scores_compare(runs=runs)}


@register.inclusion_tag("evaluation/scores/_task_set_links.html")
def task_set_score_links() -> dict:
    return {"task_sets": TaskSet.objects.annotate(
        scores=Count("score_definitions", filter=Q(score_definitions__archived=False))).order_by("name")}
