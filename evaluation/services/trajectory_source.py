"""Finished episodes as trajectories: the "episodes" trajectory source this app registers in
memweb.registry, through which orbs' DMRM source-memory builder reads episodes without importing
the evaluation app (orbs sits below evaluation in the stack)."""
from evaluation.models import Episode
from evaluation.services.episodes import episode_trajectory


def trajectories_of_domain(*, domain: str, workspace, limit: int = 500) -> list[dict]:
    """Completed episodes of `domain` in `workspace`, newest first, as trajectory dicts."""
    # With its task: a trajectory's diagnosis comes from the task's environment.
    episodes = Episode.objects.select_related("task").of(workspace).filter(
        status=Episode.Status.COMPLETED, task__domain=domain)[:limit]
    return [episode_trajectory(e) | {"episode_ref": f"episode:{e.pk}"} for e in episodes]
