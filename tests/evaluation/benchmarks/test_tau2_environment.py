"""τ²-bench retail as an environment, Django-free: reading the benchmark in both layouts, the
validator on all 114 tasks (gold replay earns 1, doing nothing 0 where a change is required), the
reward's components, the offline players and re-grading."""
import shutil

import pytest

from evaluation.environments import Environment
from evaluation.environments.benchmark import BenchmarkEnvironment, BenchmarkFolderError, gold_solution
from evaluation.environments.tau2_retail import TAU2_RETAIL, reward
from evaluation.environments.tau2_retail.players import GOLD_AGENT_LABEL
from evaluation.environments.tau2_retail.source import FILES


def test_it_is_a_benchmark_environment():
    assert isinstance(TAU2_RETAIL, Environment) and isinstance(TAU2_RETAIL, BenchmarkEnvironment)
    assert TAU2_RETAIL.builtin_tasks() == []


def test_the_json_folder_reads_with_provenance_and_splits(tau2_source):
    assert (tau2_source.layout, len(tau2_source.tasks), tau2_source.licence) == ("json", 114, "MIT")
    assert set(tau2_source.files) == set(FILES) and all(len(digest) == 64 for digest in tau2_source.files.values())
    assert (len(tau2_source.splits["train"]), len(tau2_source.splits["test"])) == (74, 40)
    splits = {spec["id"]: spec["split"] for spec in tau2_source.tasks}
    assert [splits[task_id] for task_id in ("0", "5")] == ["train", "test"]
    assert set(tau2_source.world.database) == {"products", "users", "orders"}
    assert tau2_source.world.policy.startswith("# Retail agent policy")


def test_a_checkout_reads_with_its_commit(tmp_path, tau2_dir):
    folder = tmp_path / "tau2-bench" / "data" / "tau2" / "domains" / "retail"
    folder.mkdir(parents=True)
    for name in FILES:
        (folder / name).symlink_to(tau2_dir / name)
    git = tmp_path / "tau2-bench" / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "refs" / "heads" / "main").write_text("a2c0247" + "0" * 33 + "\n")
    source = TAU2_RETAIL.read_source(tmp_path / "tau2-bench")
    assert (source.layout, source.commit, len(source.tasks)) == ("checkout", "a2c0247" + "0" * 33, 114)
    assert "data/tau2/domains/retail/db.json" in source.files


@pytest.mark.parametrize("missing", FILES)
def test_a_folder_missing_a_file_is_refused_naming_it(tmp_path, tau2_dir, missing):
    for name in FILES:
        if name != missing:
            shutil.copy(tau2_dir / name, tmp_path / name) if name != "db.json" else \
                (tmp_path / name).symlink_to(tau2_dir / name)
    with pytest.raises(BenchmarkFolderError, match=f"missing {missing}"):
        TAU2_RETAIL.read_source(tmp_path)


def test_a_partial_checkout_names_the_checkout_path(tmp_path):
    (tmp_path / "data" / "tau2" / "domains" / "retail").mkdir(parents=True)
    with pytest.raises(BenchmarkFolderError, match="missing data/tau2/domains/retail/tasks.json"):
        TAU2_RETAIL.read_source(tmp_path)


def test_a_broken_file_is_refused_naming_it(tmp_path, tau2_dir):
    for name in FILES:
        (tmp_path / name).symlink_to(tau2_dir / name)
    (tmp_path / "tasks.json").unlink()
    (tmp_path / "tasks.json").write_text("[{")
    with pytest.raises(BenchmarkFolderError, match="tasks.json: not JSON"):
        TAU2_RETAIL.read_source(tmp_path)


def test_every_task_validates_gold_earns_one_and_nothing_earns_zero_where_a_change_is_required(tau2_tasks):
    changing = 0
    for spec in tau2_tasks.values():
        checked, problems = TAU2_RETAIL.spec_errors(spec)
        assert (checked is not None, problems) == (True, []), spec["id"]
        calls, replies = gold_solution(spec)
        gold = TAU2_RETAIL.replay(task=spec, calls=calls, replies=tuple(replies))
        assert gold.reward.reward == 1.0, spec["id"]
        nothing = TAU2_RETAIL.replay(task=spec, calls=[])
        if reward.changes_database(spec):
            changing += 1
            assert (nothing.reward.reward, nothing.reward.breakdown["db"]) == (0.0, 0.0), spec["id"]
    # The 11 others only look things up or transfer, or (task 105) their one change is refused, as upstream.
    assert changing == 103


def test_the_reward_counts_the_communicate_check_and_leaves_assertions_unjudged(tau2_tasks):
    spec = next(s for s in tau2_tasks.values() if s["required_outputs"] and s["nl_assertions"])
    silent = TAU2_RETAIL.replay(task=spec, calls=spec["gold_calls"])
    assert (silent.reward.success, silent.reward.breakdown["db"], silent.reward.breakdown["communicate"]) == \
        (False, 1.0, 0.0)
    assert silent.reward.breakdown["nl_assertions_not_judged"] == len(spec["nl_assertions"])
    value = spec["required_outputs"][0]["value"]
    assert TAU2_RETAIL.tells(value, f"It comes to {value[:1]},{value[1:]} in all.") is (len(value) > 1)


def test_spec_errors_name_a_world_never_imported_and_a_bad_field(tau2_tasks):
    spec = dict(tau2_tasks["0"], world="0" * 64)
    assert "import the benchmark first" in TAU2_RETAIL.spec_errors(spec)[1][0]
    assert TAU2_RETAIL.spec_errors(dict(tau2_tasks["0"], split="holdout"))[1] == [
        "split: must be one of train, dev, test"]


def test_a_changed_gold_call_is_a_new_version(tau2_tasks):
    spec = tau2_tasks["0"]
    changed = dict(spec, gold_calls=spec["gold_calls"][:-1])
    assert TAU2_RETAIL.content_hash(changed) != TAU2_RETAIL.content_hash(spec)
    assert TAU2_RETAIL.content_changes(spec, changed) == ["gold_actions"]
    assert TAU2_RETAIL.content_changes(spec, dict(spec, split="test")) == []


def test_the_agent_policy_is_the_benchmarks(tau2_tasks, tau2_source):
    assert TAU2_RETAIL.agent_policy(task=tau2_tasks["0"]).endswith(tau2_source.world.policy)
    assert tau2_source.world.policy not in TAU2_RETAIL.agent_policy()


def _play(spec, *, seed=0, rates=None, memory=None):
    agent = TAU2_RETAIL.scripted_agent(seed=seed, key=spec["id"], error_rates=rates)
    return TAU2_RETAIL.play(task=spec, agent=agent, customer=TAU2_RETAIL.scripted_customer(task=spec, seed=seed),
                            memory=memory)


def test_the_offline_players_solve_a_task_without_errors_and_say_they_use_gold(tau2_tasks):
    spec = tau2_tasks["5"]
    outcome = _play(spec)
    assert (outcome.reward.success, outcome.ended_by, outcome.errors, outcome.committed) == (True, "stop", [], [])
    assert TAU2_RETAIL.scripted_agent(seed=0, key="5").label == GOLD_AGENT_LABEL
    assert "uses the gold answer" in GOLD_AGENT_LABEL


@pytest.mark.parametrize("kind", ["wrong_tool", "wrong_arguments"])
def test_an_error_fails_the_database_is_diagnosed_and_a_memory_with_its_advice_prevents_it(tau2_tasks, kind):
    spec = tau2_tasks["5"]
    failed = _play(spec, rates={kind: 1.0})
    assert (failed.reward.success, failed.committed, failed.reward.breakdown["db"]) == (False, [kind], 0.0)
    assert [error["kind"] for error in failed.errors] == [kind]

    class Advice:  # a memory that hands back the diagnosis, as a reflection would
        def before_turn(self, **_):
            return failed.errors[0]["detail"], None

    helped = _play(spec, rates={kind: 1.0}, memory=Advice())
    assert (helped.reward.success, helped.committed) == (True, [])


def test_a_result_not_told_fails_the_communicate_check(tau2_tasks):
    spec = next(s for s in tau2_tasks.values() if s["required_outputs"])
    outcome = _play(spec, rates={"result_unused": 1.0})
    assert (outcome.reward.breakdown["db"], outcome.reward.breakdown["communicate"]) == (1.0, 0.0)
    assert [error["kind"] for error in outcome.errors] == ["result_unused"]


def test_rescore_replays_the_transcript(tau2_tasks):
    spec = tau2_tasks["5"]
    outcome = _play(spec, rates={"wrong_arguments": 1.0})
    again = TAU2_RETAIL.rescore(task=spec, transcript=outcome.messages, played=spec)
    assert (again.success, again.state_hash) == (False, outcome.reward.state_hash)
    fixed = dict(spec, gold_calls=[], gold_actions=[])
    assert TAU2_RETAIL.rescore(task=fixed, transcript=outcome.messages, played=spec).breakdown["db"] == 0.0


def test_a_database_row_missing_a_field_is_refused_naming_it(tmp_path, tau2_dir):
    for name in FILES:
        if name != "db.json":
            (tmp_path / name).symlink_to(tau2_dir / name)
    (tmp_path / "db.json").write_text('{"products": {}, "users": {}, "orders": {"#W1": {"order_id": "#W1"}}}')
    with pytest.raises(BenchmarkFolderError, match="db.json: orders '#W1' lacks user_id, address, items"):
        TAU2_RETAIL.read_source(tmp_path)
