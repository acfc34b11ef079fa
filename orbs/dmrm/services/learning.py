"""The target memory M_t: each decision step appends (o_i, g_i, a_i, r_i, o_{i+1}) and
updates that (state, action) entry's Q-value.

Within one write (an API batch, a stored episode) each trajectory's steps are applied last step
first, so a final reward reaches the first step in one pass whatever order the steps were posted
in; steps posted in separate writes are applied as they arrive (the paper's online update).
The successor state o' whose best Q the update bootstraps from is found by exact (normalised)
text, or, as the bank chooses, by embedding cosine at or above its state similarity; a step
whose trajectory ends there (done, or no next observation) has no successor.

One row per (bank, state, action) is the Q-table entry. The update runs under
SELECT ... FOR UPDATE on that row, so episodes running in parallel that meet the
same pair queue behind each other and every update is counted. The next state's
best Q is read inside the same lock. Only the target memory is ever written here:
source memories are read-only to runs.
"""
import math
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import OperationalError, transaction
from django.db.models import F, Max, Sum
from django.utils import timezone

from orbs.dmrm.models import DMRMSettings, Experience, ExperienceStep, ExperienceTrajectory
from orbs.dmrm.qlearning import (
    ACTION_MAX_CHARS,
    GOAL_MAX_CHARS,
    OBSERVATION_MAX_CHARS,
    entry_text,
    q_target,
    q_update,
    state_key,
    text_key,
)
from orbs.dmrm.services.source import trajectory_steps
from orbs.errors import OrbsError
from orbs.services.banks import bank_embedder
from orbs.services.search import vectors_nearest

DEADLOCK_DETECTED = "40P01"  # PostgreSQL's SQLSTATE for a detected deadlock
DEADLOCK_RETRIES = 3

# What a person or program may set; the bank it belongs to is not one of them.
SETTINGS_FIELDS = ("alpha", "gamma", "c_max", "n_success", "suppression_mode", "source_weight", "scan_limit",
                   "min_similarity", "state_match", "state_similarity")
REQUIRED_TEXT = ("trajectory_id", "goal", "observation", "action")
# Every text a transition carries, with the most characters it may have (the columns' sizes).
TEXT_LIMITS = {"trajectory_id": 200, "goal": GOAL_MAX_CHARS, "observation": OBSERVATION_MAX_CHARS,
               "action": ACTION_MAX_CHARS, "next_observation": OBSERVATION_MAX_CHARS, "domain": 64, "task_ref": 200,
               "run_ref": 200, "episode_ref": 200, "customer_key": 200}


class SourceMemoryReadOnly(OrbsError):
    """Runs never write to a source memory."""


class DMRMSettingsInvalid(OrbsError):
    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems  # (field name, message)
        super().__init__("invalid DMRM settings: " + "; ".join(f"{f}: {m}" for f, m in problems))


class TransitionError(OrbsError):
    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems  # (field path, message)
        super().__init__("invalid transitions: " + "; ".join(f"{f}: {m}" for f, m in problems))


@dataclass
class Transition:
    trajectory_id: str
    step: int
    goal: str
    observation: str
    action: str
    reward: float
    next_observation: str = ""
    done: bool = False
    success: bool | None = None
    memory: str = Experience.Memory.TARGET
    domain: str = ""
    task_ref: str = ""
    run_ref: str = ""
    episode_ref: str = ""
    customer_key: str = ""


def dmrm_settings_get(*, bank) -> DMRMSettings:
    settings, _ = DMRMSettings.objects.get_or_create(bank=bank)
    return settings


def dmrm_settings_update(*, bank, params: dict) -> DMRMSettings:
    """The bank's DMRM settings with `params` (field name -> value) applied and saved. Raises
    DMRMSettingsInvalid naming each unknown field or value out of its range, saving nothing; the
    ranges are the model's validators, the ones the settings page's form checks."""
    settings = dmrm_settings_get(bank=bank)
    unknown = [(name, "not a DMRM setting") for name in params if name not in SETTINGS_FIELDS]
    if unknown:
        raise DMRMSettingsInvalid(unknown)
    for name, value in params.items():
        setattr(settings, name, value)
    try:
        settings.full_clean(exclude=["bank"])
    except ValidationError as invalid:
        raise DMRMSettingsInvalid([(name, " ".join(messages)) for name, messages in invalid.message_dict.items()]) from None
    settings.save()
    return settings


def trajectories_steps(*, bank, trajectory_ids: list[str]) -> int:
    """Steps the target memory holds for these trajectories."""
    steps = ExperienceTrajectory.objects.filter(bank=bank, trajectory_id__in=trajectory_ids).aggregate(n=Sum("steps"))
    return steps["n"] or 0


def successful_trajectories(*, bank, domain: str = "") -> int:
    """Successful trajectories of the target memory: of `domain` when given (the task's own
    domain, whose M_t the paper counts), else of the whole bank."""
    finished = ExperienceTrajectory.objects.filter(bank=bank, success=True)
    return (finished.filter(domain=domain) if domain else finished).count()


def _problems(index: int, t: Transition) -> list[tuple[str, str]]:
    where = f"transitions[{index}]"
    problems = [(f"{where}.{name}", "must not be empty") for name in REQUIRED_TEXT if not str(getattr(t, name)).strip()]
    problems += [(f"{where}.{name}", f"{len(getattr(t, name)):,} characters; at most {limit:,} are allowed")
                 for name, limit in TEXT_LIMITS.items() if len(getattr(t, name)) > limit]
    if not isinstance(t.reward, (int, float)) or not math.isfinite(t.reward):
        problems.append((f"{where}.reward", "must be a finite number"))
    if t.memory != Experience.Memory.TARGET:
        problems.append((f"{where}.memory", "runs write to the target memory only; source memories are read-only"))
    return problems


def _validated(transitions: list[Transition]) -> None:
    problems = [p for i, t in enumerate(transitions) for p in _problems(i, t)]
    if any(p[1].startswith("runs write") for p in problems):
        raise SourceMemoryReadOnly("; ".join(f"{f}: {m}" for f, m in problems))
    if problems:
        raise TransitionError(problems)


def _next_max(bank_id: int, t: Transition, settings: DMRMSettings, next_vector) -> float | None:
    """max_a Q(g, o', a) over the target memory's entries of the successor state; None when the
    trajectory ends at this step or nothing is known about o'."""
    if t.done or not t.next_observation.strip():
        return None
    target = Experience.objects.filter(bank_id=bank_id, memory=Experience.Memory.TARGET)
    if settings.state_match == DMRMSettings.StateMatch.EXACT:
        next_key = state_key(goal=t.goal, observation=t.next_observation)
        return target.filter(state_key=next_key).aggregate(best=Max("q_value"))["best"]
    model = settings.bank.embedding_model
    nearest = vectors_nearest(queryset=target.filter(embedding_model=model), vector=next_vector,
                              k=settings.scan_limit)
    values = [e.q_value for e, cosine in nearest if cosine >= settings.state_similarity]
    return max(values) if values else None


def _entry(bank, t: Transition, *, vector, tokens: int, model: str, gated: bool) -> Experience:
    entry, _ = Experience.objects.get_or_create(
        bank=bank, memory=Experience.Memory.TARGET, state_key=state_key(goal=t.goal, observation=t.observation),
        action_key=text_key(t.action),
        defaults={"goal": t.goal, "observation": t.observation, "action": t.action, "reward": t.reward,
                  "next_observation": t.next_observation, "next_state_key": "", "trajectory_id": t.trajectory_id,
                  "step": t.step, "domain": t.domain, "task_ref": t.task_ref, "run_ref": t.run_ref,
                  "episode_ref": t.episode_ref, "vector": vector, "embedding_model": model, "token_length": tokens,
                  "needs_review": gated, "customer_key": t.customer_key},
    )
    return Experience.objects.select_for_update().get(pk=entry.pk)


def _learn(entry: Experience, t: Transition, settings: DMRMSettings, next_vector) -> Experience:
    next_max = _next_max(entry.bank_id, t, settings, next_vector)
    entry.q_value = q_update(q=entry.q_value, alpha=settings.alpha,
                             target=q_target(reward=t.reward, gamma=settings.gamma, next_max=next_max))
    entry.visits += 1
    entry.bootstraps += next_max is not None
    entry.reward, entry.next_observation = t.reward, t.next_observation
    entry.next_state_key = state_key(goal=t.goal, observation=t.next_observation)
    entry.updated_at = timezone.now()
    entry.save(update_fields=["q_value", "visits", "bootstraps", "reward", "next_observation", "next_state_key",
                              "updated_at"])
    return entry


def _trajectory_note(bank, t: Transition) -> None:
    row, _ = ExperienceTrajectory.objects.get_or_create(bank=bank, trajectory_id=t.trajectory_id,
                                                        defaults={"domain": t.domain, "customer_key": t.customer_key})
    changes = {"steps": F("steps") + 1}
    if t.done:
        changes.update(success=t.success, finished_at=timezone.now())
        Experience.objects.filter(bank=bank, memory=Experience.Memory.TARGET, trajectory_id=t.trajectory_id).update(
            success=t.success)
    ExperienceTrajectory.objects.filter(pk=row.pk).update(**changes)


def _backwards(transitions: list[Transition]) -> list[int]:
    """Positions of the transitions in the order they are applied: trajectories in the order they
    first appear, each one's steps last first."""
    first_seen: dict[str, int] = {}
    for position, t in enumerate(transitions):
        first_seen.setdefault(t.trajectory_id, position)
    return sorted(range(len(transitions)), key=lambda i: (first_seen[transitions[i].trajectory_id], -transitions[i].step))


def _next_vectors(model, transitions: list[Transition], settings: DMRMSettings) -> list:
    if settings.state_match != DMRMSettings.StateMatch.SIMILAR:
        return [None] * len(transitions)
    return [v.tolist() for v in model.embed([f"{t.next_observation}\n{t.goal}" for t in transitions])]


def experiences_append_batch(*, bank, transitions: list[Transition], through_api: bool = False) -> list[Experience]:
    """Apply the transitions, each trajectory backwards, all or none; the entries come back in the
    order posted. Embedding happens before the transaction so row locks are held for milliseconds.
    `through_api`: entries it creates wait for review when the bank's gate is on (the API's writes);
    a run's own writes are served to it at once."""
    _validated(transitions)
    settings, model = dmrm_settings_get(bank=bank), bank_embedder(bank)
    vectors = [v.tolist() for v in model.embed([f"{t.observation}\n{t.goal}" for t in transitions])]
    lengths = [model.count_tokens(entry_text(goal=t.goal, observation=t.observation, action=t.action))
               for t in transitions]
    inputs = list(zip(transitions, vectors, _next_vectors(model, transitions, settings), lengths))
    for attempt in range(DEADLOCK_RETRIES):
        try:
            return _apply(bank, inputs, settings, model.model_name, gated=through_api and settings.review_api_writes)
        except OperationalError as error:
            # Two batches locking shared entries in opposite orders: PostgreSQL aborts one
            # of them whole, so replaying it is safe and keeps the updates in order.
            if getattr(error.__cause__, "sqlstate", None) != DEADLOCK_DETECTED or attempt == DEADLOCK_RETRIES - 1:
                raise


def _apply(bank, inputs: list[tuple], settings, model_name: str, *, gated: bool) -> list[Experience]:
    """Each (trajectory, step) is learnt from once: a step posted again, in this batch or an earlier
    one, answers the entry it updated and changes nothing."""
    entries: dict[int, Experience] = {}
    transitions = [t for t, *_ in inputs]
    applied: list[Transition] = []
    with transaction.atomic():
        for position in _backwards(transitions):
            t, vector, next_vector, tokens = inputs[position]
            # The unique (bank, trajectory, step) row makes a concurrent retry wait for this one, then skip.
            step, new = ExperienceStep.objects.get_or_create(bank=bank, trajectory_id=t.trajectory_id, step=t.step,
                                                             defaults={"customer_key": t.customer_key})
            if not new:
                entries[position] = Experience.objects.get(pk=step.experience_id)
                continue
            entry = _entry(bank, t, vector=vector, tokens=tokens, model=model_name, gated=gated)
            entries[position] = _learn(entry, t, settings, next_vector)
            ExperienceStep.objects.filter(pk=step.pk).update(experience=entry)
            applied.append(t)
        for t in applied:  # after every entry exists, so a closing step marks them all
            _trajectory_note(bank, t)
    return [entries[position] for position in range(len(inputs))]


def experience_append(*, bank, trajectory_id: str, step: int, goal: str, observation: str, action: str,
                      reward: float, next_observation: str = "", done: bool = False, success: bool | None = None,
                      memory: str = Experience.Memory.TARGET, domain: str = "", task_ref: str = "",
                      run_ref: str = "", episode_ref: str = "", customer_key: str = "") -> Experience:
    """One decision step into M_t; `done` with `success` closes the trajectory."""
    transition = Transition(trajectory_id=trajectory_id, step=step, goal=goal, observation=observation,
                            action=action, reward=reward, next_observation=next_observation, done=done,
                            success=success, memory=memory, domain=domain, task_ref=task_ref, run_ref=run_ref,
                            episode_ref=episode_ref, customer_key=customer_key)
    return experiences_append_batch(bank=bank, transitions=[transition])[0]


def experiences_from_trajectory(*, bank, trajectory: dict, trajectory_id: str, run_ref: str = "",
                                episode_ref: str = "") -> int:
    """Write a finished trajectory (orbs.schemas.TrajectoryIn shape) into M_t, once: every tool
    call is a step, rewarded 0 until the last, which gets the episode's reward and closes the
    trajectory. Returns the steps written: 0 when it was written before or made no tool call."""
    written = experiences_from_trajectories(bank=bank, trajectories=[
        TrajectoryToLearn(trajectory, trajectory_id, run_ref=run_ref, episode_ref=episode_ref)])
    return written[trajectory_id]


@dataclass(frozen=True)
class TrajectoryToLearn:
    trajectory: dict  # orbs.schemas.TrajectoryIn shape
    trajectory_id: str
    run_ref: str = ""
    episode_ref: str = ""


def _transitions_of(item: TrajectoryToLearn) -> list[Transition]:
    """Every tool call a step, rewarded 0 until the last, which gets the episode's reward and closes it."""
    trajectory, steps = item.trajectory, trajectory_steps(item.trajectory)
    final, last = float(trajectory.get("reward") or 0.0), len(steps) - 1
    return [
        Transition(trajectory_id=item.trajectory_id, step=i, goal=goal, observation=observation, action=action,
                   reward=final if i == last else 0.0, next_observation="" if i == last else steps[i + 1][1],
                   done=i == last, success=bool(trajectory.get("success")) if i == last else None,
                   domain=str(trajectory.get("domain", "")), task_ref=str(trajectory.get("task_id", "")),
                   run_ref=item.run_ref, episode_ref=item.episode_ref,
                   customer_key=str(trajectory.get("customer_key") or ""))
        for i, (goal, observation, action) in enumerate(steps)]


def experiences_from_trajectories(*, bank, trajectories: list[TrajectoryToLearn]) -> dict[str, int]:
    """`experiences_from_trajectory` for each, in order, as one batch (a trial's end): one embedding
    call and one transaction for all their steps, applied trajectory after trajectory, each last step
    first, as separate calls would apply them. Steps written per trajectory id (0: written before,
    or no tool call)."""
    known = set(ExperienceTrajectory.objects.filter(
        bank=bank, trajectory_id__in=[item.trajectory_id for item in trajectories]).values_list("trajectory_id", flat=True))
    written = {item.trajectory_id: 0 for item in trajectories}
    transitions = []
    for item in trajectories:
        if item.trajectory_id not in known:
            known.add(item.trajectory_id)  # a trajectory given twice is learnt from once
            steps = _transitions_of(item)
            written[item.trajectory_id] = len(steps)
            transitions.extend(steps)
    if transitions:
        experiences_append_batch(bank=bank, transitions=transitions)
    return written


def experiences_updates(*, queryset) -> dict:
    """Q updates of these entries, and how many of them bootstrapped from a successor state."""
    totals = queryset.order_by().aggregate(visits=Sum("visits"), bootstraps=Sum("bootstraps"))
    return {"visits": totals["visits"] or 0, "bootstraps": totals["bootstraps"] or 0}
