"""The memory-layers leaderboard: for one task set, one row per memory layer (an external layer's
rows split by the service it reached), from the workspace's completed runs on that set. Scripted
runs and LLM runs never share a row (a scripted policy's success says nothing of an LLM's), nor do
runs whose memory was reflected with the gold answer, nor runs whose agent replayed it (a benchmark's
gold-replay agent) with runs whose agent did not."""
from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.urls import reverse

from evaluation.metrics import pass_k
from evaluation.runs.models import EvaluationRun
from evaluation.runs.services.results import run_matrix


@dataclass
class BoardRow:
    name: str
    scripted: bool
    oracle: bool  # its memory was reflected with the gold answer: labelled, never ranked with the others
    uses_gold: bool  # its agent replayed the gold answer (EvaluationRun.agent_uses_gold): labelled
    runs: list = field(default_factory=list)
    episodes: int = 0
    successes: int = 0
    pass_at_trials: list = field(default_factory=list)  # each run's Pass^k with k = its trials

    @property
    def success(self) -> float | None:
        return self.successes / self.episodes if self.episodes else None

    @property
    def pass_k(self) -> float | None:
        values = [value for value in self.pass_at_trials if value is not None]
        return sum(values) / len(values) if values else None

    @property
    def url(self) -> str:
        """Where the row's numbers lead: its one run, or the compare page of its runs."""
        if len(self.runs) == 1:
            return self.runs[0].get_absolute_url()
        return f"{reverse('evaluation:run_compare')}?{urlencode([('runs', run.pk) for run in self.runs])}"


def _row_name(run: EvaluationRun) -> str:
    return run.memory_layer.arm_name(run)


def _pass_at_trials(run: EvaluationRun) -> float | None:
    """Pass^k with k = the run's trials; None when an episode without a verdict leaves a task short."""
    try:
        return pass_k(run_matrix(run=run, trials=run.metrics_trials), run.metrics_trials)
    except ValueError:
        return None


def memory_layers_board(*, workspace, task_set) -> list[BoardRow]:
    """Rows best first (pooled per-trial success over the row's runs' finished episodes)."""
    runs = EvaluationRun.objects.of(workspace).select_related("task_set").filter(
        task_set=task_set, status=EvaluationRun.Status.COMPLETED).order_by("pk")
    rows: dict[tuple[str, bool, bool, bool], BoardRow] = {}
    for run in runs:
        key = (_row_name(run), run.scripted, run.reflects_with_answer_key, run.agent_uses_gold)
        row = rows.setdefault(key, BoardRow(name=key[0], scripted=key[1], oracle=key[2], uses_gold=key[3]))
        row.runs.append(run)
        row.episodes += run.episodes_finished - run.episodes_error
        row.successes += run.successes
        row.pass_at_trials.append(_pass_at_trials(run))
    return sorted(rows.values(), key=lambda row: (row.scripted, row.oracle, -(row.success or 0), row.name))
