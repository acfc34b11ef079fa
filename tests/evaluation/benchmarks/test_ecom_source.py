"""Reading ECom-Bench: the JSON form in the shared folder, and a checkout's layout (a fake one built
here from the JSON form, its tasks written as the Python literals the repository holds)."""
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from evaluation.environments.benchmark import BenchmarkFolderError, world_key
from evaluation.environments.ecom_bench import ECOM
from evaluation.environments.ecom_bench.source import DATA_FILES, FALLBACK_AGENT_POLICY
from tests.evaluation.benchmarks.ecom_support import ecom_folder, ecom_source  # noqa: F401

AGENT_WIKI = "Agent rules (test): platform {platform}, shop {shop_id}, customer {user_id}."
COMMIT = "bc5018d" + "0" * 33


def _call(record: str, call: dict) -> str:
    arguments = dict(call["arguments"])
    if "product_info_list" in arguments:  # the repository writes these as ProductInfo(...) records
        items = ", ".join(f"ProductInfo(product_id={i['product_id']!r}, quantity={i['quantity']!r})"
                          for i in arguments.pop("product_info_list"))
        body = ", ".join(f"{key!r}: {value!r}" for key, value in arguments.items())
        return f"{record}(name={call['name']!r}, arguments={{{body}, 'product_info_list': [{items}]}})"
    return f"{record}(name={call['name']!r}, arguments={arguments!r})"


def tasks_py(tasks: list[dict]) -> str:
    """ALL_TASKS as the repository writes it: Task(...) records of Validation, Action and Search."""
    records = []
    for task in tasks:
        meta = task["metadata"]
        validation = (f"Validation(outputs={meta['outputs']!r}, "
                      f"actions=[{', '.join(_call('Action', a) for a in meta['actions'])}], "
                      f"searches=[{', '.join(_call('Search', s) for s in meta['searches'])}])")
        records.append(f"    Task(annotator={task['annotator']!r}, user_id={task['user_id']!r}, "
                       f"shop_id={task['shop_id']!r}, platform={task['platform']!r},\n"
                       f"         instruction={task['instruction']!r},\n         metadata={validation}),")
    return ("from utils import Task, Action, Search, Validation, ProductInfo\n\n"
            "ALL_TASKS = [\n" + "\n".join(records) + "\n]\n")


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A fake checkout of ECom-Bench at commit COMMIT, built from the shared JSON form."""
    json_form, root = ecom_folder(), tmp_path / "ECom-Bench"
    story = root / "envs" / "story"
    shutil.copytree(json_form / "data", story / "data")
    shutil.copy(json_form / "wiki.md", story / "wiki.md")
    (story / "tasks.py").write_text(tasks_py(json.loads((json_form / "tasks.json").read_text())), encoding="utf-8")
    (root / "wikis").mkdir()
    (root / "wikis" / "agent_wiki.md").write_text(AGENT_WIKI, encoding="utf-8")
    (root / ".git" / "refs" / "heads").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".git" / "refs" / "heads" / "main").write_text(COMMIT + "\n")
    return root


def test_it_reads_the_json_form(ecom_source):
    assert ecom_source.benchmark == "ecom-bench" and ecom_source.layout == "json"
    assert ecom_source.licence == "Apache-2.0" and ecom_source.source.endswith("XiaoduoAILab/ECom-Bench")
    tasks = ecom_source.tasks
    assert [task["id"] for task in tasks] == [str(n) for n in range(53)]
    assert ecom_source.splits == {"test": [str(n) for n in range(53)]}
    assert sum(len(t["gold_actions"]) for t in tasks) == 115 and sum(len(t["gold_lookups"]) for t in tasks) == 100
    assert sum(len(t["required_outputs"]) for t in tasks) == 7
    assert {t["world"] for t in tasks} == {world_key(ecom_source.world)}
    assert set(ecom_source.world.database) == set(DATA_FILES)
    assert ecom_source.world.policy == FALLBACK_AGENT_POLICY  # the JSON form keeps no agent wiki
    assert ecom_source.files["tasks.json"] == hashlib.sha256((ecom_folder() / "tasks.json").read_bytes()).hexdigest()
    assert {"wiki.md", "LICENSE", "data/orders.json"} <= set(ecom_source.files)


def test_a_task_carries_memwebs_common_fields(ecom_source):
    task = ecom_source.tasks[0]
    assert (task["domain"], task["split"], task["customer_id"]) == ("appliances", "test", "cnjd喜哥2号")
    assert task["instructions"].startswith("\n### 这是你的画像")
    assert task["persona"]["name"] == "宋敬明" and task["persona"]["emotion"].startswith("略有不满")
    assert len(task["intents"]) == 8 and "313021098954" in task["intents"][2]["slots"]["text"]
    assert task["gold_actions"][0] == {"name": "manage_urgent", "arguments": {
        "platform": "jd", "shop_id": "5de650c946e7c3001814990f", "user_id": "cnjd喜哥2号", "order_id": "313021098954"}}
    assert task["gold_lookups"][0]["name"] == "get_logistics_info_tool"
    assert task["customer_rules"].startswith("# 顾客角色扮演提示") and "{instruction}" not in task["customer_rules"]
    with_outputs = next(t for t in ecom_source.tasks if len(t["required_outputs"]) == 2)
    assert [o["value"] for o in with_outputs["required_outputs"]] in (["4000", "50"], ["晒图", "吹风机"])


def test_it_reads_a_checkout_with_the_tasks_as_python_literals(checkout, ecom_source):
    read = ECOM.read_source(checkout)
    assert read.layout == "checkout" and read.commit == COMMIT
    assert read.world.database == ecom_source.world.database and read.world.policy == AGENT_WIKI

    def without_world(task: dict) -> dict:
        return {key: value for key, value in task.items() if key != "world"}
    assert [without_world(t) for t in read.tasks] == [without_world(t) for t in ecom_source.tasks]
    assert {t["world"] for t in read.tasks} == {world_key(read.world)}
    assert {"envs/story/tasks.py", "envs/story/wiki.md", "wikis/agent_wiki.md", "envs/story/data/products.json"} \
        <= set(read.files)


def test_product_records_in_a_checkout_become_plain_arguments(checkout):
    placed = next(a for t in ECOM.read_source(checkout).tasks for a in t["gold_actions"]
                  if a["arguments"].get("action") == "增加")
    assert placed["arguments"]["product_info_list"] == [{"product_id": "100039032355", "quantity": 1}]


def test_it_reads_tasks_py_without_running_it(checkout):
    tasks = checkout / "envs" / "story" / "tasks.py"
    # The repository's instructions hold backslashes that are no escape ("<\情绪>"); and nothing runs.
    tasks.write_text('raise SystemExit("tasks.py was executed")\nALL_TASKS = [Task(annotator="0", user_id="u", '
                     'shop_id="s", platform="jd", instruction="""<情绪>平静<\\情绪>\n<意图一>\n问赠品\n<\\意图一>""", '
                     'metadata=Validation(outputs=["赠品"], actions=[], searches=[]))]\n', encoding="utf-8")
    (task,) = ECOM.read_source(checkout).tasks
    assert task["persona"]["emotion"] == "平静" and task["intents"] == [{"kind": "request", "slots": {"text": "问赠品"}}]
    assert task["required_outputs"] == [{"label": "required text 1", "value": "赠品"}]


@pytest.mark.parametrize("statement, named", [
    ('ALL_TASKS = [Task(user_id=open("x").read())]', "line 1: not a literal (Call)"),
    ("ALL_TASKS = [Task(user_id=NAME)]", "line 1: not a literal (Name)"),
    ("TASKS = []", "no ALL_TASKS = [...] assignment"),
    ("ALL_TASKS = [", "not Python"),
    ('ALL_TASKS = [Task(user_id="u")]', "task 0 lacks shop_id, platform, instruction"),
])
def test_it_refuses_a_tasks_py_that_is_not_literal_tasks(checkout, statement, named):
    (checkout / "envs" / "story" / "tasks.py").write_text(statement, encoding="utf-8")
    with pytest.raises(BenchmarkFolderError, match="tasks.py") as refused:
        ECOM.read_source(checkout)
    assert named in str(refused.value)


@pytest.mark.parametrize("missing", ["envs/story/data/orders.json", "envs/story/wiki.md", "envs/story/data"])
def test_it_refuses_a_partial_checkout_naming_the_missing_file(checkout, missing):
    target = checkout / missing
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    with pytest.raises(BenchmarkFolderError) as refused:
        ECOM.read_source(checkout)
    assert missing in str(refused.value) and "missing" in str(refused.value)


def test_it_refuses_a_folder_that_is_no_ecom_bench(tmp_path):
    with pytest.raises(BenchmarkFolderError, match="neither envs/story/tasks.py .* nor tasks.json"):
        ECOM.read_source(tmp_path)
    with pytest.raises(BenchmarkFolderError, match="no such folder"):
        ECOM.read_source(tmp_path / "absent")


def test_it_refuses_a_data_file_that_is_not_json(checkout):
    (checkout / "envs" / "story" / "data" / "orders.json").write_text("{oops", encoding="utf-8")
    with pytest.raises(BenchmarkFolderError, match=r"orders\.json: not JSON"):
        ECOM.read_source(checkout)


def test_it_refuses_a_task_naming_an_unknown_tool(tmp_path):
    folder = tmp_path / "json-form"
    shutil.copytree(ecom_folder(), folder)
    tasks = json.loads((folder / "tasks.json").read_text())
    tasks[3]["metadata"]["actions"][0]["name"] = "launch_rocket"
    (folder / "tasks.json").write_text(json.dumps(tasks, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(BenchmarkFolderError, match="task 3: unknown tool 'launch_rocket'"):
        ECOM.read_source(folder)
