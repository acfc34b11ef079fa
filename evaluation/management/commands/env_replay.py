"""Apply a list of tool calls to a fresh copy of a benchmark task's database and print the reward
with its components, for anyone to check memweb's tools and reward against the benchmark's own code:

    manage.py env_replay ENV TASK_ID (--gold | --actions FILE) [--db-out FILE]
    manage.py env_replay ENV --batch FILE.jsonl [--db-out-dir DIR]

An actions file is a JSON list of {"name", "arguments"} (other keys, such as τ²-bench's action_id,
are ignored), or an object {"actions": [...], "replies": [...]} with the agent's replies the reward
reads. A batch file holds one {"task_id", "actions"[, "replies"]} per line; each line's result is one
JSON line on stdout and its final database `<n>.json` (n counting lines from 1). Tasks come from the
imported task sets, or with --from PATH from a checkout read for the occasion. Task ids are the
benchmark's own (τ²-bench: its task id; ECom-Bench: the task's index in ALL_TASKS, from 0).
"""
import json
from pathlib import Path

from django.core.management import BaseCommand, CommandError

from evaluation.services.benchmarks import (
    BenchmarkImportError,
    calls_problem,
    gold_solution,
    replay,
    replay_task,
    source_for_replay,
)
from memweb.models import Workspace


class Command(BaseCommand):
    help = "Replay tool calls on a fresh copy of a benchmark task's database and print the reward."

    def add_arguments(self, parser):
        parser.add_argument("environment", help="the benchmark environment, e.g. tau2-retail")
        parser.add_argument("task_id", nargs="?", default="", help="the task's id in the benchmark")
        given = parser.add_mutually_exclusive_group(required=True)
        given.add_argument("--gold", action="store_true", help="replay the task's gold calls and replies")
        given.add_argument("--actions", default="", help="a JSON file of tool calls")
        given.add_argument("--batch", default="", help="a JSONL file: one {task_id, actions} per line")
        parser.add_argument("--db-out", default="", help="write the final database here (the benchmark's schema)")
        parser.add_argument("--db-out-dir", default="", help="with --batch: write <n>.json for the n-th line here")
        parser.add_argument("--from", dest="path", default="", help="read the tasks from this folder, not the database")
        parser.add_argument("--task-set", default="", help="the imported task set to take the task from")
        parser.add_argument("--workspace", default="", help="the workspace's slug to take the task from")

    def handle(self, *args, **options):
        try:
            self._run(options)
        except BenchmarkImportError as exc:
            raise CommandError(str(exc)) from None

    def _run(self, options: dict) -> None:
        self.options = options
        self.source = source_for_replay(benchmark=options["environment"], path=options["path"]) \
            if options["path"] else None
        if options["batch"]:
            if options["task_id"] or options["db_out"]:
                raise CommandError("--batch takes no TASK_ID nor --db-out (use --db-out-dir)")
            self._batch(Path(options["batch"]), options["db_out_dir"])
            return
        if not options["task_id"]:
            raise CommandError("name the task: env_replay ENV TASK_ID (--gold | --actions FILE)")
        if options["db_out_dir"]:
            raise CommandError("--db-out-dir goes with --batch; use --db-out for one task")
        spec = self._spec(options["task_id"])
        calls, replies = gold_solution(spec) if options["gold"] else _actions_file(Path(options["actions"]))
        result = replay(benchmark=options["environment"], spec=spec, calls=calls, replies=replies)
        if options["db_out"]:
            _write_json(Path(options["db_out"]), result.database)
        self._print(spec["id"], calls, result)

    def _spec(self, task_id: str) -> dict:
        workspace = None
        if self.options["workspace"]:
            workspace = Workspace.objects.filter(slug=self.options["workspace"]).first()
            if workspace is None:
                raise CommandError(f"no workspace {self.options['workspace']!r}")
        return replay_task(benchmark=self.options["environment"], task_id=str(task_id), workspace=workspace,
                           task_set_name=self.options["task_set"], source=self.source)

    def _print(self, task_id: str, calls: list[dict], result) -> None:
        refused = sum(not outcome.ok for outcome in result.results)
        self.stdout.write(f"task {task_id}: reward {result.reward.reward:g} "
                          f"({'success' if result.reward.success else 'failure'})")
        for name, value in result.reward.breakdown.items():
            self.stdout.write(f"  {name}: {value:g}")
        self.stdout.write(f"  calls: {len(calls)} ({refused} refused)")
        for call, outcome in zip(calls, result.results):
            if not outcome.ok:
                self.stdout.write(f"    {call['name']}: {outcome.content}")
        for output in result.reward.missing_outputs:
            self.stdout.write(f"  not told: {output['value']}")

    def _batch(self, path: Path, out_dir: str) -> None:
        lines = _batch_lines(path)
        folder = Path(out_dir) if out_dir else None
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        specs = [self._spec(entry["task_id"]) for _, entry in lines]  # an unknown id stops it before any output
        for (number, entry), spec in zip(lines, specs):
            result = replay(benchmark=self.options["environment"], spec=spec, calls=entry["actions"],
                            replies=entry.get("replies", []))
            if folder is not None:
                _write_json(folder / f"{number}.json", result.database)
            self.stdout.write(json.dumps({
                "line": number, "task_id": spec["id"], "reward": result.reward.reward,
                "success": result.reward.success, "components": result.reward.breakdown,
                "refused": [{"index": index, "name": call["name"], "error": outcome.content}
                            for index, (call, outcome) in enumerate(zip(entry["actions"], result.results))
                            if not outcome.ok]}, ensure_ascii=False))


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CommandError(f"{path}: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CommandError(f"{path}: not JSON ({exc})") from None


def _calls_and_replies(value, where: str) -> tuple[list[dict], list[str]]:
    calls, replies = (value.get("actions"), value.get("replies", [])) if isinstance(value, dict) else (value, [])
    problem = calls_problem(calls)
    if problem:
        raise CommandError(f"{where}: {problem}")
    if not isinstance(replies, list) or not all(isinstance(reply, str) for reply in replies):
        raise CommandError(f"{where}: replies must be a list of strings")
    return [{"name": call["name"], "arguments": call.get("arguments", {})} for call in calls], replies


def _actions_file(path: Path) -> tuple[list[dict], list[str]]:
    return _calls_and_replies(_read_json(path), str(path))


def _batch_lines(path: Path) -> list[tuple[int, dict]]:
    """Every line checked before any is replayed, so a bad line leaves no output files behind."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"{path}: {exc.strerror}") from None
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CommandError(f"{path} line {number}: not JSON ({exc})") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("task_id"), str | int):
            raise CommandError(f"{path} line {number}: needs a task_id and actions")
        calls, replies = _calls_and_replies(entry, f"{path} line {number}")
        entries.append((number, {"task_id": str(entry["task_id"]), "actions": calls, "replies": replies}))
    if not entries:
        raise CommandError(f"{path}: no lines")
    return entries


def _write_json(path: Path, value: dict) -> None:
    try:
        path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"{path}: {exc.strerror}") from None
