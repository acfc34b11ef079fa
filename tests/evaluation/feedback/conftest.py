"""Episodes to judge: real offline episodes of the built-in tasks (scripted agent, agenda customer)."""
import pytest

from evaluation.services import episode_run

MIXED_RATES = {"wrong_arguments": 0.3, "result_unused": 0.3}


def play_episode(builtin, external_id: str, *, seed: int = 0, rates: dict | None = None, bank: str = ""):
    task = builtin.tasks.get(external_id=external_id)
    memory = {"kind": "memorb", "bank": bank} if bank else None
    return episode_run(task=task, agent_config={"backend": "scripted", "error_rates": rates or {}},
                       memory_config=memory, seed=seed)


def play_many(builtin, count: int, *, seed: int = 0, bank: str = "", rates: dict | None = None):
    """`count` episodes on the first tasks, about half of them failing."""
    tasks = builtin.tasks.order_by("external_id")[:count]
    return [play_episode(builtin, t.external_id, seed=seed + n, rates=rates or MIXED_RATES, bank=bank)
            for n, t in enumerate(tasks)]


@pytest.fixture
def success_episode(builtin):
    return play_episode(builtin, "shop-app-001")


@pytest.fixture
def failed_episode(builtin):
    """A return with the wrong reason: the state is wrong, nothing else."""
    return play_episode(builtin, "shop-clo-048", seed=1, rates={"wrong_arguments": 1.0})


def make_run(name: str, episodes):
    """An evaluation run (issue 6's models) holding `episodes` in its first trial."""
    from evaluation.runs.models import EvaluationRun, RunEpisode, Trial

    run = EvaluationRun.objects.create(name=name, spec={"feedback_enabled": True})
    trial = Trial.objects.create(run=run, number=1)
    for episode in episodes:
        RunEpisode.objects.create(run=run, trial=trial, task=episode.task, task_key=episode.task_snapshot["id"],
                                  episode=episode, status=RunEpisode.Status.DONE)
    return run

# (simulated score, people's action): dislikes at low scores, likes at high ones, as people do.
PEOPLE = ([(2, "dislike")] * 3 + [(3, "dislike")] * 2 + [(3, "none")] + [(5, "none")] * 3 + [(7, "like")] * 2
          + [(7, "none")] * 2 + [(9, "like")] * 4 + [(9, "none")])
# Likes at both ends and dislikes in the middle: no rising and falling pair of curves stays within 1.
CONTRADICTORY = [(1, "like")] * 5 + [(5, "dislike")] * 5 + [(10, "like")] * 5 + [(3, "dislike")] * 3


def plant_campaign(name: str, pairs, *, writer):
    """An annotation campaign with one conversation per (simulated score, action): its one person
    wrote feedback with that action, so the action is the people's majority."""
    from annotation.models import Campaign, FeedbackTask, Item

    campaign = Campaign.objects.create(name=name, status=Campaign.Status.OPEN)
    for number, (score, action) in enumerate(pairs):
        item = Item.objects.create(
            campaign=campaign, source_ref=f"planted:{number}", conversation=[{"role": "user", "content": "Hello"}],
            simulated_feedback="Fine.", language="en", task_format="SiSo", domain="appliances", simulated_score=score)
        FeedbackTask.objects.create(item=item, campaign=campaign, status=FeedbackTask.Status.DONE, writer=writer,
                                    text="Mine.", score=score, action=action)
    return campaign
