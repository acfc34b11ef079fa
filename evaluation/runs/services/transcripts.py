"""Two runs' transcripts of one task, side by side: the episodes both runs played of the task in the
same trial, turn i of run A beside turn i of run B, and the first turn where they differ.

Each side is the episode page's own timeline (evaluation.services.timeline.episode_timeline), so a
turn shows here exactly what it shows there: the customer's words, the memories injected, the tool
calls with their results and the agent's reply. Trials are paired by number, as the compare page
pairs them; a task is compared only when both runs have a transcript of it.
"""
from dataclasses import dataclass

from evaluation.models import Episode
from evaluation.runs.models import EvaluationRun, RunEpisode
from evaluation.services.timeline import episode_timeline

# What a turn is compared on, in the order a difference is named.
TURN_PARTS = ("customer", "memories", "tool calls", "reply")


class TranscriptsNotFound(LookupError):
    """The asked-for transcripts do not exist; the message says what is missing. `shared`: the tasks
    both runs played (empty when a run is unknown), so the page can offer them instead."""

    def __init__(self, message: str, *, shared: list[str] = ()):
        super().__init__(message)
        self.shared = list(shared)


@dataclass(frozen=True)
class Played:
    """One run's transcript of the task in one trial."""

    trial: int
    episode_id: int
    success: bool | None


def transcript_runs(*, a: str, b: str) -> tuple[EvaluationRun, EvaluationRun]:
    """Runs A and B by their ids as a link gives them, in the current workspace (a run of another
    workspace is as unknown as a run that never was)."""
    runs = []
    for name, value in (("A", a), ("B", b)):
        run = EvaluationRun.objects.filter(pk=int(value)).first() if value.isdigit() else None
        if run is None:
            raise TranscriptsNotFound(f"run {name}: no run #{value} in this workspace" if value
                                      else f"run {name}: no run given")
        runs.append(run)
    if runs[0].pk == runs[1].pk:
        raise TranscriptsNotFound(f"runs A and B are both run #{runs[0].pk}: choose two different runs")
    return runs[0], runs[1]


def _played(run: EvaluationRun, task_key: str) -> list[Played]:
    rows = RunEpisode.objects.filter(run=run, task_key=task_key, episode__isnull=False)
    return [Played(number, episode_id, success) for number, episode_id, success
            in rows.order_by("trial__number").values_list("trial__number", "episode_id", "success")]


def shared_played_tasks(*, run_a: EvaluationRun, run_b: EvaluationRun) -> list[str]:
    """The tasks both runs have a transcript of, by external id, sorted (the prev/next order)."""
    def keys(run):
        return set(RunEpisode.objects.filter(run=run, episode__isnull=False).values_list("task_key", flat=True))
    return sorted(keys(run_a) & keys(run_b))


def _default_trial(a: dict[int, Played], b: dict[int, Played]) -> int:
    """The first trial whose verdicts differ (what a flip row points at), else the first both played,
    else the first either played."""
    both = sorted(set(a) & set(b))
    flipped = [number for number in both if a[number].success != b[number].success]
    return (flipped or both or sorted(set(a) | set(b)))[0]


def _chosen_trial(trial: str | int | None, a: dict[int, Played], b: dict[int, Played], task_key: str) -> int:
    if trial in (None, ""):
        return _default_trial(a, b)
    played = ", ".join(map(str, sorted(set(a) | set(b))))
    if not str(trial).isdigit():
        raise TranscriptsNotFound(f"trial {trial!r} is not a trial number (trials played: {played})")
    if int(trial) not in set(a) | set(b):
        raise TranscriptsNotFound(f"trial {trial} of task {task_key} was played by neither run (trials played: {played})")
    return int(trial)


def _prompt_blocks(value) -> list[str]:
    """Every prompt block a memory record holds (MemOrb's, DMRM's, a naive RAG's, an external
    layer's): the memory text the agent was given, whatever the layer."""
    if isinstance(value, dict):  # an empty block (nothing retrieved) gave the agent nothing
        own = [value["prompt_block"]] if isinstance(value.get("prompt_block"), str) and value["prompt_block"] else []
        return own + [block for key, item in value.items() if key != "prompt_block" for block in _prompt_blocks(item)]
    if isinstance(value, list):
        return [block for item in value for block in _prompt_blocks(item)]
    return []


def turn_parts(turn: dict) -> dict[str, object]:
    """What two sides' turns are compared on: the customer's words, the memory text injected, the
    tool calls (name and arguments) and the agent's words. Timings are left out: they always differ."""
    events = turn["events"]
    return {"customer": [(e["text"], e["ended"]) for e in events if e["type"] == "customer"],
            "memories": _prompt_blocks([turn["memory"], turn["step_memories"]]),
            "tool calls": [(e["name"], e.get("arguments")) for e in events if e["type"] == "tool"],
            "reply": [e["text"] for e in events if e["type"] == "reply"]}


def _differences(turn_a: dict | None, turn_b: dict | None) -> list[str]:
    """What two turns of the same number differ in; a turn only one side reached is its own difference."""
    if turn_a is None or turn_b is None:
        return [f"{'A' if turn_a is None else 'B'} had ended"]
    parts_a, parts_b = turn_parts(turn_a), turn_parts(turn_b)
    return [part for part in TURN_PARTS if parts_a[part] != parts_b[part]]


def turns_align(*, a: list[dict], b: list[dict]) -> list[dict]:
    """Turn i of A beside turn i of B (None where one side ended earlier), each row with what the
    two turns differ in."""
    by_number_a, by_number_b = {t["number"]: t for t in a}, {t["number"]: t for t in b}
    return [{"number": number, "a": by_number_a.get(number), "b": by_number_b.get(number),
             "differs": _differences(by_number_a.get(number), by_number_b.get(number))}
            for number in sorted(set(by_number_a) | set(by_number_b))]


def first_difference(rows: list[dict]) -> dict | None:
    """The first aligned row whose turns differ, or None when the transcripts match turn by turn."""
    return next((row for row in rows if row["differs"]), None)


def _side(run: EvaluationRun, played: Played | None) -> dict:
    if played is None:
        return {"run": run, "episode": None, "turns": []}
    episode = Episode.objects.select_related("task").get(pk=played.episode_id)
    return {"run": run, "episode": episode, "turns": episode_timeline(episode=episode)["turns"]}


def _neighbours(shared: list[str], task_key: str) -> tuple[str | None, str | None]:
    index = shared.index(task_key)
    return (shared[index - 1] if index else None), (shared[index + 1] if index + 1 < len(shared) else None)


def transcripts_compare(*, run_a: EvaluationRun, run_b: EvaluationRun, task_key: str,
                        trial: str | int | None = None) -> dict:
    """Both runs' transcripts of `task_key` in one trial (the first whose verdicts differ unless
    `trial` is given), aligned turn by turn, with the first difference, the trials either run
    played and the previous and next shared task. Raises TranscriptsNotFound naming what is missing."""
    shared = shared_played_tasks(run_a=run_a, run_b=run_b)
    if task_key not in shared:
        raise TranscriptsNotFound(_not_shared_message(run_a, run_b, task_key, shared), shared=shared)
    a, b = ({p.trial: p for p in _played(run, task_key)} for run in (run_a, run_b))
    number = _chosen_trial(trial, a, b, task_key)
    side_a, side_b = _side(run_a, a.get(number)), _side(run_b, b.get(number))
    rows = turns_align(a=side_a["turns"], b=side_b["turns"])
    previous, following = _neighbours(shared, task_key)
    return {"a": side_a, "b": side_b, "task": task_key, "trial": number, "rows": rows,
            "first_difference": first_difference(rows), "trials": sorted(set(a) | set(b)),
            "shared": len(shared), "position": shared.index(task_key) + 1, "previous": previous, "next": following}


def _not_shared_message(run_a: EvaluationRun, run_b: EvaluationRun, task_key: str, shared: list[str]) -> str:
    missing = [f"#{run.pk}" for run in (run_a, run_b) if not _played(run, task_key)]
    subject = f"run {missing[0]} has" if len(missing) == 1 else f"runs {' and '.join(missing)} have"
    choice = f"pick one of the {len(shared)} tasks both runs played" if shared else "the runs played no task in common"
    return f"{subject} no transcript of task {task_key or '(none given)'}; {choice}"
