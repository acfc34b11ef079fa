"""Reading ECom-Bench from a folder: a checkout of its repository, or the JSON form kept in
../shared/benchmarks/ecom-bench/ (see that folder's README).

A checkout holds the tasks as Python literals (`ALL_TASKS = [Task(...), ...]` in envs/story/tasks.py).
The file is parsed with `ast` and only literals are read: strings, numbers, lists, dicts and calls
of the benchmark's record classes with keyword arguments (read as dicts). It is never executed.

Each task becomes a memweb spec (the common fields of evaluation.environments.protocol). ECom-Bench
has no ids: a task's id is its position in ALL_TASKS from 0, the benchmark's own task_index. It has
no split either: every task is "test".
"""
import ast
import hashlib
import json
import re
import warnings
from pathlib import Path

from evaluation.environments.benchmark import BenchmarkFolderError, BenchmarkSource, BenchmarkWorld, world_key
from evaluation.environments.ecom_bench.tools import tool_named

BENCHMARK = "ecom-bench"
SOURCE = "https://github.com/XiaoduoAILab/ECom-Bench"
LICENCE = "Apache-2.0"
SPLIT = "test"
DATA_FILES = ("discount", "invoices", "logistics", "orders", "products", "register_cashback", "service", "users_info")
RECORD_CLASSES = ("Task", "Validation", "Action", "Search", "ProductInfo")
INSTRUCTION_SLOT = "{instruction}"

CHECKOUT = {"tasks": "envs/story/tasks.py", "data": "envs/story/data", "customer_wiki": "envs/story/wiki.md",
            "agent_wiki": "wikis/agent_wiki.md", "licence": "LICENSE"}
JSON_FORM = {"tasks": "tasks.json", "data": "data", "customer_wiki": "wiki.md", "agent_wiki": "agent_wiki.md",
             "licence": "LICENSE"}

# The agent's rules when the folder lacks the benchmark's agent wiki (wikis/agent_wiki.md; the JSON
# form does not keep it): memweb's own words, with the same three slots the benchmark fills per task.
FALLBACK_AGENT_POLICY = (
    "You are a customer-service agent of an online shop on the platform {platform}; the shop's shop_id is "
    "{shop_id} and the customer you serve has the user_id {user_id}. Reply in the customer's language (Chinese), "
    "politely and briefly, and only with what the tools returned or the conversation says. Use the tools to look "
    "things up before answering, and pass ids exactly as the customer or the tools gave them. Change an order "
    "(cancel, modify, return, exchange, expedite, refund, cashback, invoice, service visit) only when the customer "
    "asks for that change, only when the order's status allows it, and only after listing what will change and "
    "getting the customer's confirmation. When an order paid with the JD e-card (京东E卡) is cancelled or returned, "
    "refund its amount to the e-card with manage_ecard_tool.")


def read_source(path: Path) -> BenchmarkSource:
    """The tasks, database and policies in `path`; BenchmarkFolderError naming what is missing."""
    path = Path(path)
    if not path.is_dir():
        raise BenchmarkFolderError(f"{path}: no such folder")
    if (path / CHECKOUT["tasks"]).is_file():
        layout, names = "checkout", CHECKOUT
    elif (path / JSON_FORM["tasks"]).is_file():
        layout, names = "json", JSON_FORM
    else:
        raise BenchmarkFolderError(f"{path}: not an ECom-Bench folder: neither {CHECKOUT['tasks']} (a checkout) "
                                   f"nor {JSON_FORM['tasks']} (the JSON form) is there")
    files: dict[str, str] = {}
    raw_tasks = _tasks_read(path, names["tasks"], files, layout)
    database = _database_read(path, names["data"], files)
    customer_wiki = _text_read(path, names["customer_wiki"], files)
    if INSTRUCTION_SLOT not in customer_wiki:
        raise BenchmarkFolderError(f"{path / names['customer_wiki']}: has no {INSTRUCTION_SLOT} slot for the "
                                   "task's instruction: not ECom-Bench's customer wiki")
    agent_wiki = _text_read(path, names["agent_wiki"], files) if (path / names["agent_wiki"]).is_file() else ""
    if (path / names["licence"]).is_file():
        _text_read(path, names["licence"], files)
    world = BenchmarkWorld(database=database, policy=agent_wiki or FALLBACK_AGENT_POLICY)
    key = world_key(world)
    tasks = [task_spec(index, raw, world=key, database=database, customer_wiki=customer_wiki, where=names["tasks"])
             for index, raw in enumerate(raw_tasks)]
    return BenchmarkSource(benchmark=BENCHMARK, layout=layout, tasks=tasks, world=world, files=files,
                           licence=LICENCE, source=SOURCE, commit=_commit(path) if layout == "checkout" else "",
                           splits={SPLIT: [task["id"] for task in tasks]})


# --- files ----------------------------------------------------------------------------------

def _bytes_read(path: Path, relative: str, files: dict) -> bytes:
    file = path / relative
    if not file.is_file():
        raise BenchmarkFolderError(f"{file}: missing (an ECom-Bench folder needs it)")
    content = file.read_bytes()
    files[relative] = hashlib.sha256(content).hexdigest()
    return content


def _text_read(path: Path, relative: str, files: dict) -> str:
    try:
        return _bytes_read(path, relative, files).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BenchmarkFolderError(f"{path / relative}: not UTF-8 text ({exc.reason})") from None


def _json_read(path: Path, relative: str, files: dict):
    try:
        return json.loads(_text_read(path, relative, files))
    except json.JSONDecodeError as exc:
        raise BenchmarkFolderError(f"{path / relative}: not JSON: {exc.msg} at line {exc.lineno}") from None


def _database_read(path: Path, folder: str, files: dict) -> dict:
    """Every data file, keyed by its name without .json, as the benchmark loads them."""
    if not (path / folder).is_dir():
        raise BenchmarkFolderError(f"{path / folder}: missing (the folder of the benchmark's data files)")
    names = sorted({*DATA_FILES, *(file.stem for file in (path / folder).glob("*.json"))})
    return {name: _json_read(path, f"{folder}/{name}.json", files) for name in names}


def _tasks_read(path: Path, relative: str, files: dict, layout: str) -> list[dict]:
    if layout == "json":
        tasks = _json_read(path, relative, files)
        if not isinstance(tasks, list):
            raise BenchmarkFolderError(f"{path / relative}: must hold a JSON list of tasks")
        return tasks
    return tasks_py_read(_text_read(path, relative, files), where=str(path / relative))


def _commit(path: Path) -> str:
    """The checkout's commit from .git (HEAD, then the ref it names, loose or packed); "" when unreadable."""
    git = path / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head.removeprefix("ref: ")
        if (git / ref).is_file():
            return (git / ref).read_text().strip()
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    except OSError:
        return ""
    return ""


# --- envs/story/tasks.py, literals only -----------------------------------------------------

def tasks_py_read(source: str, *, where: str) -> list[dict]:
    """ALL_TASKS of a tasks.py, read from its syntax tree."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its instructions hold backslashes Python warns about ("<\\情绪>")
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            raise BenchmarkFolderError(f"{where}: not Python: {exc.msg} at line {exc.lineno}") from None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ALL_TASKS" for t in node.targets):
            tasks = _literal(node.value, where)
            if not isinstance(tasks, list):
                raise BenchmarkFolderError(f"{where}: ALL_TASKS must be a list")
            return tasks
    raise BenchmarkFolderError(f"{where}: no ALL_TASKS = [...] assignment")


def _literal(node: ast.AST, where: str):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(item, where) for item in node.elts]
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {_literal(key, where): _literal(value, where) for key, value in zip(node.keys, node.values)}
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in RECORD_CLASSES
            and not node.args and all(k.arg for k in node.keywords)):
        return {k.arg: _literal(k.value, where) for k in node.keywords}
    raise BenchmarkFolderError(f"{where} line {node.lineno}: not a literal ({type(node).__name__}); only "
                               f"literals and {', '.join(RECORD_CLASSES)}(...) with keyword arguments are read")


# --- one task -> memweb's spec --------------------------------------------------------------

_OPENING = re.compile(r"<(?P<tag>[^<>\\/]+)>")
_REQUIRED = ("user_id", "shop_id", "platform", "instruction")


def task_spec(index: int, raw, *, world: str, database: dict, customer_wiki: str, where: str) -> dict:
    """memweb's spec of the task at `index` of ALL_TASKS."""
    if not isinstance(raw, dict):
        raise BenchmarkFolderError(f"{where}: task {index} is not a Task record")
    missing = [name for name in _REQUIRED if not isinstance(raw.get(name), str)]
    if missing:
        raise BenchmarkFolderError(f"{where}: task {index} lacks {', '.join(missing)} (text)")
    metadata = raw.get("metadata") or {}
    actions, searches = _calls(metadata.get("actions"), index, where), _calls(metadata.get("searches"), index, where)
    outputs = metadata.get("outputs") or []
    if not all(isinstance(output, str) for output in outputs):
        raise BenchmarkFolderError(f"{where}: task {index}: outputs must be strings")
    tags = _tags(raw["instruction"])
    intents = [{"kind": "request", "slots": {"text": text}} for tag, text in tags.items() if tag.startswith("意图")]
    user = database.get("users_info", {}).get(raw["user_id"]) or {}
    return {
        "id": str(index), "domain": "appliances", "split": SPLIT, "difficulty": _difficulty(actions, searches),
        "error_kinds": _error_kinds(actions, searches, outputs), "customer_id": raw["user_id"],
        "persona": {"name": user.get("用户姓名", raw["user_id"]), "emotion": tags.get("情绪", ""),
                    "patience": tags.get("耐心程度", ""), "trust": tags.get("信任程度", "")},
        "intents": intents, "instructions": raw["instruction"],
        "customer_rules": customer_wiki.split(INSTRUCTION_SLOT)[0].rstrip(),
        "gold_lookups": searches, "gold_actions": actions,
        "required_outputs": [{"label": f"required text {n}", "value": value} for n, value in enumerate(outputs, 1)],
        "platform": raw["platform"], "shop_id": raw["shop_id"], "user_id": raw["user_id"],
        "annotator": str(raw.get("annotator", "")), "world": world,
    }


def _tags(instruction: str) -> dict[str, str]:
    """The instruction's tagged parts (`<情绪>...<\\情绪>`, nested ones too), by tag."""
    tags = {}
    for opening in _OPENING.finditer(instruction):
        tag = opening["tag"]
        close = re.search(r"<[\\/]" + re.escape(tag) + ">", instruction[opening.end():])
        if close:
            tags.setdefault(tag.strip(), instruction[opening.end():opening.end() + close.start()].strip())
    return tags


def _calls(raw, index: int, where: str) -> list[dict]:
    calls = []
    for call in raw or []:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise BenchmarkFolderError(f"{where}: task {index}: each action and search needs a name")
        if tool_named(call["name"]) is None:
            raise BenchmarkFolderError(f"{where}: task {index}: unknown tool {call['name']!r}")
        arguments = call.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise BenchmarkFolderError(f"{where}: task {index}: the arguments of {call['name']} must be a dict")
        calls.append({"name": call["name"], "arguments": arguments})
    return calls


def _difficulty(actions: list, searches: list) -> str:
    """ECom-Bench does not grade difficulty; memweb sorts by how many gold calls a task needs."""
    needed = len(actions) + len(searches)
    return "easy" if needed <= 2 else "medium" if needed <= 4 else "hard"


def _error_kinds(actions: list, searches: list, outputs: list) -> list[str]:
    """Which of the MemOrb error kinds the task gives an agent the chance to make."""
    return [kind for kind, present in (("wrong_tool", searches), ("wrong_arguments", actions),
                                       ("result_unused", outputs)) if present]
