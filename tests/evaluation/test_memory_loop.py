"""The full memory loop offline: scripted episodes -> heuristic reflections (Orbs, real embeddings,
real pgvector) -> retrieval before the agent answers -> fewer errors in the next trial."""
from django.conf import settings

from evaluation.services import episode_run, episode_trajectory
from orbs.models import Orb, RetrievalLog
from orbs.services import bank_get_or_create, orb_from_episode

RATES = {"wrong_tool": 0.6, "wrong_arguments": 0.6, "result_unused": 0.6}


def _trial(tasks, *, seed: int, memory: dict) -> list:
    return [episode_run(task=task, agent_config={"error_rates": RATES}, memory_config=memory, seed=seed)
            for task in tasks]


def test_memorb_retrieval_raises_the_scripted_agents_success_over_trials(builtin, client, operator_user):
    bank = bank_get_or_create(name="shop memory loop", auto_approve="always", approved_only=False,
                              prompt_token_budget=2000)
    memory = {"kind": "memorb", "bank": bank.name, "approved_only": False, "per_turn": False}
    tasks = list(builtin.tasks.order_by("external_id"))[::13]

    first = _trial(tasks, seed=1, memory=memory)
    assert all(e.memories[0]["hits"] == [] for e in first)  # trial 1 starts from an empty bank
    for episode in first:
        orb_from_episode(bank=bank, trajectory=episode_trajectory(episode), source_label="trial 1")
    assert Orb.objects.filter(bank=bank, embedding_model=settings.EMBEDDING_MODEL).count() == len(tasks)

    second = _trial(tasks, seed=2, memory=memory)
    control = _trial(tasks, seed=2, memory={"kind": "none"})
    successes = [sum(e.success for e in trial) for trial in (first, second, control)]
    assert successes[1] > successes[0] + 2 and successes[1] > successes[2] + 2, successes

    # Same seed, same planned errors: the memory arm made fewer of them because it remembered.
    committed = [sum(len(e.committed_errors) for e in trial) for trial in (second, control)]
    assert committed[0] < committed[1]
    assert all(hit["score"] > 0 for e in second for hit in e.memories[0]["hits"])
    assert all(len(e.memories) == 1 and e.memories[0]["hits"] for e in second)
    logged = RetrievalLog.objects.get(pk=second[0].memories[0]["retrieval_id"])
    assert logged.outcome_success == second[0].success  # the Orb pages show how the episode ended

    client.force_login(operator_user)
    page = client.get(second[0].get_absolute_url()).content.decode()
    hit = second[0].memories[0]["hits"][0]
    record = second[0].memories[0]
    assert f"retrieved {record['retrieved']}, injected {record['injected']} before the agent answered" in page
    assert f'href="/orbs/{hit["orb_id"]}/"' in page
