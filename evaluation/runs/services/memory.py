"""A run's memory: the runs' side of the memory layers (evaluation.memory_layers). What a memory
does at launch, before each decision, as each episode is stored and at each trial's end is its
layer's; here are the run's bank (fresh, or a copy of a source bank with its DMRM memory) and the
thin entry points the run protocol calls, each asking the run's layer.
"""
from django.core.exceptions import ObjectDoesNotExist

from evaluation.configs import MemoryConfig
from evaluation.memory_layers.registry import memory_layer
from evaluation.models import Episode
from evaluation.runs.models import EvaluationRun, RunEpisode, Trial
from evaluation.runs.services.spec import RunLaunchError, RunSpec
from evaluation.services import EpisodePlay
from orbs.dmrm.services import dmrm_memory_copy
from orbs.errors import OrbsError
from orbs.services import bank_copy, bank_get_or_create, bank_resolve

BANK_NAME_CHARS = 100


# --- set-up ---------------------------------------------------------------------------------

def run_memory_prepare(*, run: EvaluationRun, spec: RunSpec, source, copied=None) -> None:
    """The run's layer sets up its memory: a bank of its own (a copy of `source`, a bank, or a fresh
    one) and its settings. `copied`: the copy of `source` made already (run_bank_copy). Raises
    RunLaunchError when the copy fails."""
    memory_layer(spec.memory_mode).prepare(run=run, spec=spec, source=source, copied=copied)


def _run_bank_name(run: EvaluationRun) -> str:
    return f"run #{run.pk} · {run.name}"[:BANK_NAME_CHARS]


def run_bank(run: EvaluationRun, source, copied=None):
    """The run's own bank: fresh, or the copy of `source` with its DMRM memory."""
    if source is None:
        return bank_get_or_create(name=_run_bank_name(run), workspace=run.workspace,
                                  retrieval_k=run.run_spec.memory_k,
                                  description=f"Memory of evaluation run #{run.pk}.", approved_only=False)
    bank = copied or run_bank_copy(run=run, source=source)
    dmrm_memory_copy(source=source, target=bank)
    return bank


def run_bank_copy(*, run: EvaluationRun, source, progress=None):
    """The copy of `source`'s Orbs the run starts from, written in one transaction of its own (a
    launch's job makes it ahead of the rest of the set-up, with `progress`). The copy an earlier,
    interrupted delivery of that job made is whole, and taken as it is. Raises RunLaunchError."""
    try:
        return bank_resolve(_run_bank_name(run), workspace=run.workspace)
    except ObjectDoesNotExist:
        pass
    try:
        return bank_copy(source=source, name=_run_bank_name(run), progress=progress)
    except OrbsError as exc:
        raise RunLaunchError([("bank_source", f"copying bank {source.name!r} {exc}")]) from None


# --- each episode ---------------------------------------------------------------------------

def run_memory_config(run: EvaluationRun, *, row: RunEpisode | None = None) -> MemoryConfig:
    """What the run's episodes retrieve with; the hooks get the run's bank itself besides. `row`:
    the episode being played, whose key seeds the withholding draw."""
    return run.memory_layer.episode_config(run, row=row)


def run_episode_memory_record(*, play: EpisodePlay, episode: Episode, row: RunEpisode) -> None:
    """Inside the transaction that stores the episode: what it teaches the run's memory."""
    row.run.memory_layer.episode_stored(play=play, episode=episode, row=row)


# --- each trial's end -----------------------------------------------------------------------

def trial_memorise(*, trial: Trial) -> None:
    """Write the trial's finished trajectories into the run's memory; a retried finish skips
    what it wrote before."""
    trial.run.memory_layer.trial_end(trial=trial)


def run_pending_memories(*, run: EvaluationRun) -> int:
    """The run's memories still waiting for a reviewer."""
    return run.memory_layer.pending_review(run)
