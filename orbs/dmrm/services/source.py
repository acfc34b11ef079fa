"""Source memories M_s: built once from finished episodes of another domain, then read-only.

Each assistant tool call of an episode is one step: g is the task (the first
customer utterance), o the last customer utterance plus the last tool result,
a the tool name with its arguments, r the episode's final reward on the last
step and 0 before it. A step's Q is its discounted return within the episode.
A step is kept when its episode succeeded or reached the reward threshold, and
its Q reaches the Q threshold.

Building is reviewing: an operator chose the episodes and the thresholds and saw the preview, so the
kept steps are approved together, as one decision recorded on the source memory and naming the
builder; a reviewer can still reject single entries afterwards.

Embedding the kept steps takes minutes for a few thousand of them, so the pages and the API build
as a background job (memweb.jobs): the request checks the name and the thresholds, a worker embeds
batch by batch, reporting its progress, then writes the memory in one transaction.
"""
import json
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from memweb.jobs import JobContext, JobFailed, job_start
from memweb.registry import trajectory_source
from orbs.dmrm.models import Experience, SourceMemory
from orbs.dmrm.qlearning import (
    ACTION_MAX_CHARS,
    GOAL_MAX_CHARS,
    clipped,
    discounted_returns,
    entry_text,
    observation_text,
    state_key,
    text_key,
)
from orbs.dmrm.services.history import SOURCE_MEMORY
from orbs.errors import OrbsError
from orbs.models import MemoryBank
from orbs.services.banks import bank_embedder
from orbs.services.history import history_append


@dataclass(frozen=True)
class SourceCandidate:
    trajectory_id: str
    step: int
    goal: str
    observation: str
    action: str
    reward: float
    next_observation: str
    q_value: float
    success: bool
    episode_reward: float
    domain: str
    included: bool
    reason: str
    customer_key: str = ""  # the episode's customer: erasing them removes the entry from the source memory too


def action_text(call: dict) -> str:
    """A tool call as DMRM stores an action a: its name with its arguments as sorted JSON, bounded."""
    arguments = json.dumps(call.get("arguments") or {}, sort_keys=True, ensure_ascii=False)
    return clipped(f"{call['name']}({arguments})", ACTION_MAX_CHARS)


def goal_text(first_user_turn: str) -> str:
    """The goal g: the customer's opening request, bounded."""
    return clipped(first_user_turn, GOAL_MAX_CHARS)


def trajectory_steps(trajectory: dict) -> list[tuple[str, str, str]]:
    """(goal, observation, action) for every assistant tool call, in order. The observation is the
    last customer turn and the last tool result seen (`observation_text`), which is also how an
    agent's hook asks before each step."""
    goal, user, tool, steps = "", "", "", []
    for message in trajectory.get("messages", []):
        if message["role"] == "user":
            user = message.get("content", "")
            goal = goal or goal_text(user)
        elif message["role"] == "tool":
            tool = message.get("content", "")
        for call in message.get("tool_calls") or ():
            steps.append((goal, observation_text(user=user, tool=tool), action_text(call)))
    return steps


def _candidates(trajectory: dict, *, index: int, gamma: float, min_reward: float, min_q: float):
    steps = trajectory_steps(trajectory)
    final, success = float(trajectory.get("reward") or 0.0), bool(trajectory.get("success"))
    rewards = [0.0] * (len(steps) - 1) + [final] if steps else []
    returns = discounted_returns(rewards, gamma=gamma)
    good_episode = success or final >= min_reward
    trajectory_id = str(trajectory.get("episode_ref") or trajectory.get("task_id") or index)
    for i, ((goal, observation, action), r, q) in enumerate(zip(steps, rewards, returns)):
        nxt = steps[i + 1][1] if i + 1 < len(steps) else ""
        keep = good_episode and q >= min_q
        reason = ("kept" if keep else "left out") + (
            f": episode {'succeeded' if success else 'failed'}, reward {final:g} (min {min_reward:g}); "
            f"Q {q:.3f} (min {min_q:g})")
        yield SourceCandidate(trajectory_id, i, goal, observation, action, r, nxt, q, success, final,
                              str(trajectory.get("domain", "")), keep, reason,
                              customer_key=str(trajectory.get("customer_key") or ""))


def source_memory_preview(*, trajectories: list[dict], gamma: float, min_reward: float,
                          min_q: float) -> list[SourceCandidate]:
    """Every step of the episodes with whether the builder would keep it, and why."""
    return [c for index, t in enumerate(trajectories)
            for c in _candidates(t, index=index, gamma=gamma, min_reward=min_reward, min_q=min_q)]


def _experience(bank, memory: SourceMemory, c: SourceCandidate, vector, tokens: int, model: str) -> Experience:
    return Experience(
        status=Experience.Status.APPROVED, reviewer=memory.created_by, reviewed_at=memory.approved_at,
        review_note=memory.approval_note,
        bank=bank, memory=Experience.Memory.SOURCE, source_memory=memory, goal=c.goal, observation=c.observation,
        action=c.action, reward=c.reward, next_observation=c.next_observation,
        state_key=state_key(goal=c.goal, observation=c.observation),
        next_state_key=state_key(goal=c.goal, observation=c.next_observation), action_key=text_key(c.action),
        q_value=c.q_value, visits=1, trajectory_id=c.trajectory_id, step=c.step, success=c.success,
        domain=c.domain, task_ref=c.trajectory_id, episode_ref=c.trajectory_id, vector=vector,
        embedding_model=model, token_length=tokens, customer_key=c.customer_key,
    )


def _name_checked(bank, name: str) -> str:
    name = name.strip()
    if not name:
        raise OrbsError("name: a source memory needs a name")
    if SourceMemory.objects.filter(bank=bank, name=name).exists():
        raise OrbsError(f"name: bank {bank.name!r} already has a source memory called {name!r}")
    return name


def _kept(trajectories: list[dict], *, gamma: float, min_reward: float, min_q: float) -> list[SourceCandidate]:
    kept = [c for c in source_memory_preview(trajectories=trajectories, gamma=gamma, min_reward=min_reward,
                                             min_q=min_q) if c.included]
    if not kept:
        raise OrbsError("thresholds: no step of these episodes passes them; nothing to build")
    return kept


def source_memory_build(*, bank, name: str, source_domain: str, trajectories: list[dict], gamma: float,
                        min_reward: float, min_q: float, actor=None, progress=None) -> SourceMemory:
    """Create the named source memory with the kept steps, approved by the build, all or nothing.
    The steps are embedded one batch at a time (EMBEDDING_BATCH_SIZE); `progress(done, total,
    message)` (a job's) hears after each batch."""
    name = _name_checked(bank, name)
    kept = _kept(trajectories, gamma=gamma, min_reward=min_reward, min_q=min_q)
    model = bank_embedder(bank)
    vectors, tokens, size = [], [], settings.EMBEDDING_BATCH_SIZE
    for start in range(0, len(kept), size):
        batch = kept[start:start + size]
        vectors.extend(model.embed([f"{c.observation}\n{c.goal}" for c in batch]))
        tokens.extend(model.count_tokens(entry_text(goal=c.goal, observation=c.observation, action=c.action))
                      for c in batch)
        if progress is not None:
            progress(start + len(batch), len(kept), f"Embedded {start + len(batch)} of {len(kept)} steps")
    now = timezone.now()
    with transaction.atomic():
        memory = SourceMemory.objects.create(bank=bank, name=name, source_domain=source_domain,
                                             min_reward=min_reward, min_q=min_q, gamma=gamma,
                                             episodes_read=len(trajectories), created_by=actor, created_at=now,
                                             approved_at=now, approval_note=_approval_note(actor, name, kept))
        Experience.objects.bulk_create([_experience(bank, memory, c, v.tolist(), n, model.model_name)
                                        for c, v, n in zip(kept, vectors, tokens)])
        history_append(bank_id=bank.pk, rows=[(SOURCE_MEMORY, memory.pk)])
    return memory


def source_memory_build_start(*, bank, name: str, source_domain: str, gamma: float, min_reward: float,
                              min_q: float, actor=None):
    """Check the name and that some step passes the thresholds now (OrbsError naming the field when
    not), then queue the build as a background job (returned), which reads the episodes again when it runs."""
    name = _name_checked(bank, name)
    _kept(source_trajectories_from_episodes(domain=source_domain, workspace=bank.workspace), gamma=gamma,
          min_reward=min_reward, min_q=min_q)
    return job_start(kind="orbs.dmrm_source_build", title=f"Source memory “{name}” of bank “{bank.name}”",
                     payload={"bank_id": bank.pk, "name": name, "source_domain": source_domain, "gamma": gamma,
                              "min_reward": min_reward, "min_q": min_q}, user=actor, workspace=bank.workspace)


def source_memory_build_job(context: JobContext, *, bank_id: int, name: str, source_domain: str, gamma: float,
                            min_reward: float, min_q: float) -> dict:
    """The build job: embeds batch by batch (its progress), then writes in one transaction."""
    bank = MemoryBank.objects.of(context.workspace).filter(pk=bank_id).first()
    if bank is None:
        raise JobFailed("the bank no longer exists")
    context.progress(0, message=f"Reading finished episodes of {source_domain}")
    try:
        trajectories = source_trajectories_from_episodes(domain=source_domain, workspace=bank.workspace)
        memory = source_memory_build(bank=bank, name=name, source_domain=source_domain, trajectories=trajectories,
                                     gamma=gamma, min_reward=min_reward, min_q=min_q, actor=context.user,
                                     progress=context.progress)
    except OrbsError as refused:
        raise JobFailed(f"Nothing was built: {refused}") from refused
    count = memory.experiences.count()
    return {"bank": bank.slug, "source_memory": memory.name, "experiences": count,
            "url": reverse("orbs:dmrm_settings", args=[bank.slug]),
            "link_text": f"Open the DMRM settings of “{bank.name}” ({count} experiences built)"}


def _approval_note(actor, name: str, kept: list[SourceCandidate]) -> str:
    builder = actor.get_username() if actor else "a builder with no user account (a script)"
    return (f"Approved as a whole by {builder}, who built source memory {name.strip()!r} from "
            f"{len({c.trajectory_id for c in kept})} episodes ({len(kept)} steps kept).")


def source_trajectories_from_episodes(*, domain: str, workspace, limit: int = 500) -> list[dict]:
    """Finished (completed) episodes of `domain` in `workspace`, newest first, as trajectory dicts,
    from the "episodes" trajectory source the evaluation app registers."""
    return trajectory_source("episodes")(domain=domain, workspace=workspace, limit=limit)
