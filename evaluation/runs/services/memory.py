"""A run's memory: the one place where evaluation runs write to orbs and orbs.dmrm, through their
service functions.

- set-up at launch: the run's own bank (fresh, or a copy of a source bank with its DMRM memory)
  and the run's DMRM parameters on it;
- each episode: how its retrievals ended (the only writer of those outcomes for run episodes:
  orbs' ingest fills in only outcomes nobody recorded) and, for DMRM, its steps into the target
  memory (unless the run writes them at trial end);
- each trial's end: its trajectories become Orbs and DMRM target-memory steps (memory is never
  reset between trials), the review gate's auto-approval, and (with withholding) the review flag
  on Orbs measured to do harm.
"""
from django.core.exceptions import ObjectDoesNotExist

from evaluation.configs import MemoryConfig
from evaluation.feedback.services import feedback_of, feedback_trajectory
from evaluation.llm_backends import memory_room
from evaluation.models import Episode
from evaluation.runs.models import EvaluationRun, MemoryMode, ReviewGate, RunEpisode, Trial
from evaluation.runs.services.spec import (
    LLM_CONTEXT_TOKENS,
    CMaxRule,
    DMRMParams,
    DMRMWriteTiming,
    RunLaunchError,
    RunSpec,
)
from evaluation.runs.services.splits import learning_rows, learns_from
from evaluation.services import EpisodeConfigError, EpisodePlay, bank_harmful_flag, episode_ref, episode_trajectory
from evaluation.services.memory_effects import HarmLook, bank_harmful_experiences_flag
from evaluation.vocabulary import EvaluationLLMRole
from memweb.llm import role_config
from orbs.dialogues.services import dialogue_from_trajectory, dialogues_copy
from orbs.dmrm.services import (
    TrajectoryToLearn,
    dmrm_memory_copy,
    dmrm_retrieval_outcome_record,
    dmrm_settings_update,
    experiences_from_trajectories,
    experiences_from_trajectory,
    trajectories_steps,
)
from orbs.errors import OrbsError
from orbs.services import (
    EpisodeToRemember,
    bank_copy,
    bank_get_or_create,
    bank_policy_update,
    bank_resolve,
    orbs_from_episodes,
    orbs_pending_approve,
    orbs_pending_count,
    retrieval_outcome_record,
)

BANK_NAME_CHARS = 100


# --- set-up ---------------------------------------------------------------------------------

def run_memory_prepare(*, run: EvaluationRun, spec: RunSpec, source, copied=None) -> None:
    """Give a run with memory its own bank (a copy of `source`, a bank, or a fresh one) and, for
    DMRM, apply the run's parameters to it. `copied`: the copy of `source` made already
    (run_bank_copy). Raises RunLaunchError when the copy fails."""
    if spec.memory_mode == MemoryMode.NONE:
        return
    run.bank = _run_bank(run, source, copied)
    _dialogues_prepare(run, source)
    if run.uses_dmrm:
        run.dmrm_config = _dmrm_configure(run, spec)
    run.save(update_fields=["bank", "dmrm_config"])


def _run_bank_name(run: EvaluationRun) -> str:
    return f"run #{run.pk} · {run.name}"[:BANK_NAME_CHARS]


def _run_bank(run: EvaluationRun, source, copied=None):
    if source is None:
        return bank_get_or_create(name=_run_bank_name(run), workspace=run.workspace, retrieval_k=run.memory_k,
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


def _dialogues_prepare(run: EvaluationRun, source) -> None:
    """A naive-RAG run started from a bank starts from that bank's past dialogues too."""
    if run.uses_dialogues and source is not None:
        dialogues_copy(source=source, target=run.bank)


_RUN_ONLY = {"write_timing", "c_max_rule"}  # DMRMParams that are the run's, not bank settings
MAX_C_MAX = 8000  # the largest C_max a bank accepts


def _c_max(spec: RunSpec, params: DMRMParams) -> tuple[int | None, str]:
    """C_max to set on the run's bank and where it came from; None keeps a copied bank's own. An agent
    with no window of its own (the scripted one) is given the paper's 4k."""
    if params.c_max is not None:
        return params.c_max, "given"
    if params.c_max_rule == CMaxRule.MINILM_512:
        return 512, str(CMaxRule.MINILM_512)
    if spec.dmrm is None and spec.bank_source:
        return None, "the copied bank's"
    answer = spec.agent.max_tokens or role_config(EvaluationLLMRole.ACTOR).max_tokens
    room = memory_room(context_tokens=spec.agent.context_tokens or LLM_CONTEXT_TOKENS, answer_tokens=answer)
    return max(16, min(room, MAX_C_MAX)), str(CMaxRule.AGENT_WINDOW)


def _dmrm_configure(run: EvaluationRun, spec: RunSpec) -> dict:
    """The parameters in force, to keep on the run. The run's "approved only" then also gates
    the copied source memory."""
    params = spec.dmrm or DMRMParams()
    given = spec.dmrm.model_dump(exclude=_RUN_ONLY | {"c_max"}) if spec.dmrm else {}
    c_max, c_max_rule = _c_max(spec, params)
    settings = dmrm_settings_update(bank=run.bank, params=given | ({"c_max": c_max} if c_max else {}))
    bank_policy_update(bank=run.bank, approved_only=spec.approved_only)
    bank_fields = {name: getattr(settings, name) for name in DMRMParams.model_fields if name not in _RUN_ONLY}
    return bank_fields | {"write_timing": str(params.write_timing), "c_max_rule": c_max_rule}


# --- each episode ---------------------------------------------------------------------------

def run_memory_config(run: EvaluationRun, *, row: RunEpisode | None = None) -> MemoryConfig:
    """What the run's episodes retrieve with; the hooks get the run's bank itself besides. `row`:
    the episode being played, whose key seeds the withholding draw."""
    if run.memory_mode == MemoryMode.NONE:
        return MemoryConfig()
    return MemoryConfig(kind=run.memory_mode, bank=run.bank.slug if run.bank else "", k=run.memory_k,
                        approved_only=run.memory_approved_only, same_customer_only=run.memory_same_customer_only,
                        per_turn=run.memory_per_turn, withhold_probability=run.withhold_probability,
                        withhold_key=episode_withhold_key(row) if row else "")


def episode_withhold_key(row: RunEpisode) -> str:
    """The run's seed and the episode: a replayed episode withholds what it withheld before. The
    row's seed is the run's seed and the trial (protocol.episode_seed)."""
    return f"run-seed:{row.seed}:task:{row.task_key}"


def run_episode_memory_record(*, play: EpisodePlay, episode: Episode, row: RunEpisode) -> None:
    """What a stored episode teaches the run's memory: how its retrievals ended and its DMRM steps;
    nothing for a held-out (test) episode, whose memory stays as the train split left it."""
    if not learns_from(row):
        return
    run_episode_outcome_record(play=play, episode=episode)
    run_episode_dmrm_record(episode=episode, run=row.run)


def run_episode_outcome_record(*, play: EpisodePlay, episode: Episode) -> None:
    """Inside the transaction that stores the episode, so a dropped copy records nothing."""
    retrieval_outcome_record(retrieval_ids=play.retrieval_ids, success=episode.success, reward=episode.reward,
                             episode_ref=episode_ref(episode))


def run_episode_dmrm_record(*, episode: Episode, run: EvaluationRun) -> None:
    """Inside the transaction that stores the episode: how its DMRM retrievals ended and, unless the
    run writes at trial end, its steps into the target memory, so the trial's later episodes can
    retrieve them (the paper's M_t grows as the agent acts). Exactly once per trajectory: a
    replayed store finds the episode's trajectory written."""
    if not run.uses_dmrm:
        return
    ref = episode_ref(episode)
    dmrm_retrieval_outcome_record(retrieval_ids=[m["dmrm"]["retrieval_id"] for m in episode.memories if "dmrm" in m],
                                  success=episode.success, episode_ref=ref)
    finished = not episode.infra_error  # the trial end, too, writes only episodes that finished
    if finished and run.bank is not None and run_dmrm_write_timing(run) == DMRMWriteTiming.EPISODE:
        experiences_from_trajectory(bank=run.bank, trajectory=episode_trajectory(episode), trajectory_id=ref,
                                    run_ref=run.orb_label, episode_ref=ref)


def run_dmrm_write_timing(run: EvaluationRun) -> str:
    """Runs stored before the choice existed wrote at trial end."""
    return (run.dmrm_config or {}).get("write_timing", DMRMWriteTiming.TRIAL_END)


# --- each trial's end -----------------------------------------------------------------------

def trial_memorise(*, trial: Trial) -> None:
    """Write the trial's finished trajectories into the run's memory; a retried finish skips
    what it wrote before."""
    run = trial.run
    if run.memory_mode == MemoryMode.NONE:
        return
    if run.bank is None:
        raise EpisodeConfigError("the run's memory bank no longer exists")
    if run.uses_memorb:
        _orbs_write(run, trial)
        if run.withhold_probability:
            bank_harmful_flag(bank=run.bank, look=_harm_look(run, trial))  # an Orb may have shown it does harm
    if run.uses_dmrm:
        _experiences_write(run, trial)
    if run.uses_dialogues:
        _dialogues_write(run, trial)


def _harm_look(run: EvaluationRun, trial: Trial) -> HarmLook:
    """The harm flag looks at this run's episodes so far, once per trial end, with its error rate spread
    over the run's planned trials (evaluation.metrics.harmful_memories)."""
    rows = run.run_episodes.filter(episode__isnull=False).select_related("episode").only("id", "episode__id")
    return HarmLook(number=trial.number, planned=run.trials, label=run.orb_label,
                    episode_refs=frozenset(episode_ref(row.episode) for row in rows))


def _finished_rows(trial: Trial):
    """The trial's episodes memory learns from: finished, and never a held-out run's test episodes."""
    rows = trial.run_episodes.filter(status=RunEpisode.Status.DONE, episode__isnull=False)
    return learning_rows(rows).select_related("episode").order_by("task_key")


def _orbs_write(run: EvaluationRun, trial: Trial) -> None:
    label = f"{run.orb_label} · trial {trial.number}"
    rows = list(_finished_rows(trial).filter(orb__isnull=True))
    # One batch for the trial: the same Orbs as writing each episode in turn, at a fraction of the cost.
    results = orbs_from_episodes(bank=run.bank, source_label=label, reflection_style=run.reflection_style, episodes=[
        EpisodeToRemember(_orb_trajectory(run, row.episode), episode_ref(row.episode)) for row in rows])
    for row, result in zip(rows, results):
        row.orb = result.orb
    RunEpisode.objects.bulk_update(rows, ["orb"])
    Trial.objects.filter(pk=trial.pk).update(orbs_written=trial.run_episodes.filter(orb__isnull=False).count())
    if run.review_gate == ReviewGate.AUTO:
        orbs_pending_approve(orb_ids=_run_orb_ids(run),
                             note=f"auto-approved by {run.orb_label} (review gate: auto-approve in-run memories)")


def _orb_trajectory(run: EvaluationRun, episode: Episode) -> dict:
    """On-policy feedback (MemoryBench): the Orb is reflected from the trajectory with the user's
    feedback folded in, so the next trial plays against memory that learnt from it. Judging ran
    before the trial's end (trial_finish backfills what a dead worker missed), so a missing row is
    an error the run shows, never a silent plain Orb."""
    if not run.feedback_into_memory:
        return episode_trajectory(episode, reflection_input=run.reflection_input)
    feedback = feedback_of([episode]).first()
    if feedback is None:
        raise ValueError(f"episode {episode.pk} has no simulated feedback to write into memory")
    return feedback_trajectory(feedback=feedback, reflection_input=run.reflection_input)


def _experiences_write(run: EvaluationRun, trial: Trial) -> None:
    """Each finished trajectory into DMRM's target memory, once (a trajectory is keyed by its
    episode): at trial end it writes what the episodes' stores did not (all of it when the run
    writes at trial end). The target memory is served as it grows, so the review gate does not
    hold it back. With withholding, experiences measured to do harm are flagged for review."""
    rows = list(_finished_rows(trial))
    refs = [episode_ref(row.episode) for row in rows]
    # One batch for the trial: the same updates, in the same order, as writing each trajectory in turn.
    experiences_from_trajectories(bank=run.bank, trajectories=[
        TrajectoryToLearn(episode_trajectory(row.episode), ref, run_ref=run.orb_label, episode_ref=ref)
        for row, ref in zip(rows, refs)])
    Trial.objects.filter(pk=trial.pk).update(experiences_written=trajectories_steps(bank=run.bank, trajectory_ids=refs))
    if run.withhold_probability:
        bank_harmful_experiences_flag(bank=run.bank, look=_harm_look(run, trial))


def _dialogues_write(run: EvaluationRun, trial: Trial) -> None:
    """Each finished episode's dialogue into the run's raw-dialogue memory, once (keyed by the
    episode): the naive-RAG corpus grows at each trial's end as MemOrb's memory does. Raw dialogues
    are served unreviewed, as MemoryBench's baselines serve them, so the review gate does not apply."""
    label = f"{run.orb_label} · trial {trial.number}"
    for row in _finished_rows(trial):
        dialogue_from_trajectory(bank=run.bank, trajectory=episode_trajectory(row.episode),
                                 dialogue_ref=episode_ref(row.episode), source_label=label)


def _run_orb_ids(run: EvaluationRun):
    return run.run_episodes.filter(orb__isnull=False).values("orb_id")


def run_pending_memories(*, run: EvaluationRun) -> int:
    """The run's Orbs still waiting for a reviewer."""
    return orbs_pending_count(orb_ids=_run_orb_ids(run))
