"""A run's failure breakdown by reward component: of its scored episodes, how many failed each
pass/fail component of their environment's reward (the shop's state, grounded, look-ups, outputs;
τ²-bench's db and communicate; ...), each linked to those episodes."""
from django.urls import reverse

from evaluation.environments import UnknownEnvironment, environment
from evaluation.models import Episode


def run_component_failures(*, run) -> list[dict]:
    """[{name, failed, scored, url}] per component of the environment the run's episodes were played in."""
    rows = list(Episode.objects.filter(run_episode__run=run, status=Episode.Status.COMPLETED)
                .values_list("reward_breakdown", "task__environment"))
    if not rows:
        return []
    try:
        components = environment(rows[0][1]).reward_components
    except UnknownEnvironment:  # a package since uninstalled: its episodes keep their breakdowns
        return []
    episodes = reverse("evaluation:episode_list")
    return [{"name": name, "scored": sum(name in breakdown for breakdown, _ in rows),
             "failed": sum(breakdown.get(name) == 0.0 for breakdown, _ in rows),
             "url": f"{episodes}?run={run.pk}&component={name}"} for name in components]
