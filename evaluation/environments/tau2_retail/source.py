"""Reading τ²-bench's retail domain from a user's checkout of the benchmark, or from the flat JSON
form (the four files side by side, as in ../shared/benchmarks/tau2-retail), into memweb task specs.

A spec keeps the benchmark's task as it is (`tau2`: its id, scenario, evaluation criteria) and adds
the fields memweb's lists, feedback and players read (evaluation.environments.protocol). Nothing is
executed; the files are only parsed as JSON and Markdown.
"""
import hashlib
import json
from pathlib import Path

from evaluation.environments.benchmark import BenchmarkFolderError, BenchmarkSource, BenchmarkWorld, world_key
from evaluation.environments.tau2_retail.tools import TOOLS, WRITE_TOOLS

BENCHMARK = "tau2-retail"
DOMAIN = "retail"
CHECKOUT_FOLDER = Path("data/tau2/domains/retail")
FILES = ("tasks.json", "db.json", "policy.md", "split_tasks.json")
UPSTREAM = "https://github.com/sierra-research/tau2-bench"
LICENCE = "MIT"
SPLITS = ("train", "test")  # split_tasks.json also lists "base" (every task), which is no split


def read_source(path: Path) -> BenchmarkSource:
    """The benchmark's tasks, database and policy; BenchmarkFolderError names what is missing or unreadable."""
    path = Path(path)
    try:
        found = path.is_dir()
    except OSError as exc:  # a name too long for the file system, a folder it may not search
        raise BenchmarkFolderError(f"{path}: {exc.strerror}") from None
    if not found:
        raise BenchmarkFolderError(f"{path}: no such folder")
    layout, folder = ("checkout", path / CHECKOUT_FOLDER) if (path / CHECKOUT_FOLDER).is_dir() else ("json", path)
    missing = [str((folder / name).relative_to(path)) for name in FILES if not (folder / name).is_file()]
    if missing:
        raise BenchmarkFolderError(
            f"{path} is not a τ²-bench checkout nor its retail JSON folder: missing {', '.join(missing)}")
    raw = {name: _read(folder / name) for name in FILES}
    tasks, database = _json(raw, "tasks.json", folder, list), _json(raw, "db.json", folder, dict)
    splits = _splits(_json(raw, "split_tasks.json", folder, dict), folder)
    _database_checked(database, folder)
    world = BenchmarkWorld(database=database, policy=_text(raw, "policy.md", folder))
    key = world_key(world)
    specs = [task_spec(task, database=database, world=key, split=_split_of(str(task.get("id")), splits))
             for task in _tasks_checked(tasks, folder)]
    return BenchmarkSource(
        benchmark=BENCHMARK, layout=layout, tasks=specs, world=world, licence=LICENCE, source=UPSTREAM,
        files={str((folder / name).relative_to(path)): hashlib.sha256(data).hexdigest() for name, data in raw.items()},
        commit=_commit(path) if layout == "checkout" else "", splits=splits)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise BenchmarkFolderError(f"{path}: cannot be read ({exc.strerror})") from None


def _text(raw: dict[str, bytes], name: str, folder: Path) -> str:
    try:
        return raw[name].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BenchmarkFolderError(f"{folder / name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _json(raw: dict[str, bytes], name: str, folder: Path, kind: type):
    try:
        value = json.loads(raw[name])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BenchmarkFolderError(f"{folder / name}: not JSON ({exc})") from None
    if not isinstance(value, kind):
        raise BenchmarkFolderError(f"{folder / name}: expected a JSON {'array' if kind is list else 'object'}")
    return value


# The fields of each row the tools and the import read (db.json's data model).
_ROW_FIELDS = {"products": ("name", "product_id", "variants"),
               "users": ("user_id", "name", "address", "email", "payment_methods", "orders"),
               "orders": ("order_id", "user_id", "address", "items", "status", "fulfillments", "payment_history")}


def _database_checked(database: dict, folder: Path) -> None:
    for table, fields in _ROW_FIELDS.items():
        rows = database.get(table)
        if not isinstance(rows, dict):
            raise BenchmarkFolderError(f"{folder / 'db.json'}: no {table!r} object")
        for key, row in rows.items():
            missing = [name for name in fields if not isinstance(row, dict) or name not in row]
            if missing:
                raise BenchmarkFolderError(f"{folder / 'db.json'}: {table} {key!r} lacks {', '.join(missing)}")


def _tasks_checked(tasks: list, folder: Path) -> list[dict]:
    for number, task in enumerate(tasks):
        criteria = task.get("evaluation_criteria") if isinstance(task, dict) else None
        scenario = task.get("user_scenario") if isinstance(task, dict) else None
        if not (isinstance(criteria, dict) and isinstance(criteria.get("actions"), list)
                and isinstance(scenario, dict) and isinstance(scenario.get("instructions"), dict)
                and isinstance(task.get("id"), str | int)):
            raise BenchmarkFolderError(f"{folder / 'tasks.json'}: task {number} lacks an id, "
                                       "user_scenario.instructions or evaluation_criteria.actions")
        unknown = [a.get("name") for a in criteria["actions"] if not isinstance(a, dict) or a.get("name") not in TOOLS]
        if unknown:
            raise BenchmarkFolderError(f"{folder / 'tasks.json'}: task {task['id']} calls unknown tools {unknown}")
    return tasks


def _splits(raw: dict, folder: Path) -> dict[str, list[str]]:
    missing = [name for name in SPLITS if not isinstance(raw.get(name), list)]
    if missing:
        raise BenchmarkFolderError(f"{folder / 'split_tasks.json'}: no {' or '.join(missing)} list")
    return {name: [str(task_id) for task_id in raw[name]] for name in SPLITS}


def _split_of(task_id: str, splits: dict[str, list[str]]) -> str:
    # A task in neither list is held out: it can never leak into what a memory learns from.
    return "train" if task_id in splits["train"] else "test"


def _commit(path: Path) -> str:
    """The checkout's commit, read from .git without running git ("" when it cannot be read)."""
    git = path / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        if (git / ref).is_file():
            return (git / ref).read_text().strip()
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    except OSError:
        pass
    return ""


# ---- specs --------------------------------------------------------------------------------------

def _call(action: dict) -> dict:
    return {"name": action["name"], "arguments": action.get("arguments") or {}}


def _customer_id(calls: list[dict], database: dict) -> str:
    """The user the task is about: named by a call's user_id, or owning an order a call names, or
    found by a call's email or name and zip."""
    for call in calls:
        arguments = call["arguments"]
        if "user_id" in arguments:
            return arguments["user_id"]
        order = database["orders"].get(arguments.get("order_id", ""))
        if order:
            return order["user_id"]
        for user in database["users"].values():
            if arguments.get("email", "").lower() == user["email"].lower() or (
                    arguments.get("zip") == user["address"]["zip"]
                    and arguments.get("first_name", "").lower() == user["name"]["first_name"].lower()
                    and arguments.get("last_name", "").lower() == user["name"]["last_name"].lower()):
                return user["user_id"]
    return ""


def _difficulty(writes: int) -> str:
    return "easy" if writes <= 1 else "medium" if writes == 2 else "hard"


def instructions_text(instructions: dict) -> str:
    """What the simulated customer is told: the benchmark's user_scenario.instructions in one text."""
    parts = (("Your task", "task_instructions"), ("Why you are contacting the store", "reason_for_call"),
             ("What you know", "known_info"), ("What you do not know", "unknown_info"))
    return "\n".join(f"{label}: {instructions[key]}" for label, key in parts if instructions.get(key))


def task_spec(task: dict, *, database: dict, world: str, split: str) -> dict:
    """A memweb task spec of one benchmark task."""
    calls = [_call(action) for action in task["evaluation_criteria"]["actions"]]
    writes = [call for call in calls if call["name"] in WRITE_TOOLS]
    criteria = task["evaluation_criteria"]
    communicate = [str(value) for value in criteria.get("communicate_info") or []]
    customer_id = _customer_id(calls, database)
    user = database["users"].get(customer_id)
    instructions = task["user_scenario"]["instructions"]
    kinds = (["wrong_tool", "wrong_arguments"] if writes else []) + (["result_unused"] if communicate else [])
    return {
        "id": str(task["id"]), "domain": DOMAIN, "split": split, "difficulty": _difficulty(len(writes)),
        "error_kinds": kinds, "customer_id": customer_id,
        "persona": {"name": f"{user['name']['first_name']} {user['name']['last_name']}" if user else "",
                    "emotion": "neutral", "patience": 5, "trust": "medium"},
        "intents": [{"kind": call["name"], "slots": {}} for call in writes] or [{"kind": "inquiry", "slots": {}}],
        "instructions": instructions_text(instructions),
        "gold_lookups": [call for call in calls if call["name"] not in WRITE_TOOLS],
        "gold_actions": writes,
        "required_outputs": [{"label": "communicate_info", "value": value} for value in communicate],
        "world": world,
        "gold_calls": calls,  # every gold call in the benchmark's order (what the reward replays)
        "nl_assertions": [str(text) for text in criteria.get("nl_assertions") or []],
        "reward_basis": list(criteria.get("reward_basis") or []),
        "user_scenario": task["user_scenario"],
    }
