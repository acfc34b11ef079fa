"""The memory hooks (evaluation/memory_layers/banked.py): randomised withholding of retrieved Orbs."""
from evaluation.memory_layers.banked import memory_withheld
from evaluation.services import episode_run, episode_trajectory
from orbs.models import RetrievalHit
from orbs.services import bank_get_or_create, orb_from_episode

RATES = {"wrong_tool": 0.6, "wrong_arguments": 0.6, "result_unused": 0.6}


def test_it_draws_the_same_withholding_for_the_same_episode_and_memory():
    draws = [memory_withheld(key="run-seed:1001:task:t", memory_id=orb, probability=0.2) for orb in range(4000)]
    assert draws == [memory_withheld(key="run-seed:1001:task:t", memory_id=orb, probability=0.2)
                     for orb in range(4000)]
    assert 0.18 < sum(draws) / len(draws) < 0.22
    other = [memory_withheld(key="run-seed:1002:task:t", memory_id=orb, probability=0.2) for orb in range(4000)]
    assert other != draws  # another trial draws afresh
    assert not any(memory_withheld(key="k", memory_id=orb, probability=0.0) for orb in range(100))
    assert all(memory_withheld(key="k", memory_id=orb, probability=1.0) for orb in range(100))


def _bank_with_orbs(builtin):
    bank = bank_get_or_create(name="withholding", auto_approve="always", approved_only=False, prompt_token_budget=4000)
    tasks = list(builtin.tasks.order_by("external_id"))[:6]
    for task in tasks:
        episode = episode_run(task=task, agent_config={"error_rates": RATES}, seed=1)
        orb_from_episode(bank=bank, trajectory=episode_trajectory(episode), source_label="seed")
    return bank, tasks


def test_withheld_orbs_are_logged_and_listed_but_left_out_of_the_prompt(builtin):
    bank, tasks = _bank_with_orbs(builtin)
    memory = {"kind": "memorb", "bank": bank.name, "approved_only": False, "per_turn": False,
              "withhold_probability": 0.5, "withhold_key": "run-seed:2:task:x"}
    records = [episode_run(task=task, agent_config={"error_rates": RATES}, memory_config=memory,
                           seed=2).memories[0] for task in tasks]
    withheld = [hit for record in records for hit in record["hits"] if hit["withheld"]]
    served = [hit for record in records for hit in record["hits"] if not hit["withheld"]]
    assert withheld and served
    for record in records:
        for hit in record["hits"]:
            assert hit["withheld"] == memory_withheld(key="run-seed:2:task:x", memory_id=hit["orb_id"], probability=0.5)
            assert (f"[{hit['rank']}] " in record["prompt_block"]) == hit["injected"]
            assert not (hit["withheld"] and hit["injected"])
        assert record["withheld_ids"] == [hit["orb_id"] for hit in record["hits"] if hit["withheld"]]
        assert record["served_ids"] == [hit["orb_id"] for hit in record["hits"] if hit["injected"]]
        rows = RetrievalHit.objects.filter(retrieval_id=record["retrieval_id"])
        assert {row.orb_id: row.withheld for row in rows} == {hit["orb_id"]: hit["withheld"] for hit in record["hits"]}


def test_withholding_everything_leaves_the_prompt_empty(builtin):
    bank, tasks = _bank_with_orbs(builtin)
    memory = {"kind": "memorb", "bank": bank.name, "approved_only": False, "per_turn": False,
              "withhold_probability": 1.0, "withhold_key": "k"}
    record = episode_run(task=tasks[0], agent_config={"error_rates": RATES}, memory_config=memory).memories[0]
    assert record["hits"] and record["served_ids"] == [] and record["prompt_block"] == ""


def test_an_orb_cut_by_the_token_budget_is_not_listed_as_served(builtin):
    bank, tasks = _bank_with_orbs(builtin)
    bank.prompt_token_budget = 400  # room for some of the five retrieved Orbs, not all
    bank.save(update_fields=["prompt_token_budget"])
    memory = {"kind": "memorb", "bank": bank.name, "approved_only": False, "per_turn": False}
    record = episode_run(task=tasks[0], agent_config={"error_rates": RATES}, memory_config=memory).memories[0]
    cut = [hit["orb_id"] for hit in record["hits"] if not hit["withheld"] and not hit["injected"]]
    assert cut and record["served_ids"] and not set(cut) & set(record["served_ids"])
    assert len(record["served_ids"]) == record["injected"]
