"""DMRM (cross-task experience memory): before every decision step, the source and target experiences
nearest to the state (goal g, observation o), ranked by similarity and Q-value and packed into the
token budget C_max (orbs.dmrm.services.experiences_retrieve); each finished trajectory's steps
update the target memory's Q-table, as each episode is stored (the paper) or at trial end."""
from django.urls import reverse
from django.utils.http import urlencode

from evaluation.llm_backends import memory_room
from evaluation.memory_layers.banked import BankedLayer, finished_rows, harm_look, memory_withheld
from evaluation.memory_layers.memorb import RetrievingHook
from evaluation.memory_layers.protocol import TrialCounter
from evaluation.runs.models import Trial
from evaluation.runs.services.pins import run_environment
from evaluation.runs.services.spec import LLM_CONTEXT_TOKENS, CMaxRule, DMRMParams, DMRMWriteTiming
from evaluation.services import episode_ref, episode_trajectory
from evaluation.services.memory_effects import bank_harmful_experiences_flag
from evaluation.vocabulary import EvaluationLLMRole
from memweb.llm import role_config
from orbs.dmrm.qlearning import USER_TEXT_MAX_CHARS, clipped, observation_text
from orbs.dmrm.services import (
    HISTORY_ACTIONS,
    TrajectoryToLearn,
    action_text,
    dmrm_retrieval_outcome_record,
    dmrm_settings_update,
    experiences_from_trajectories,
    experiences_from_trajectory,
    experiences_retrieve,
    goal_text,
    trajectories_steps,
)
from orbs.services import bank_policy_update

RECENT_ACTIONS = HISTORY_ACTIONS  # the last actions shown in DMRM's prompt: the paper's five
_RUN_ONLY = {"write_timing", "c_max_rule"}  # DMRMParams that are the run's, not bank settings
MAX_C_MAX = 8000  # the largest C_max a bank accepts


class DMRMHook(RetrievingHook):
    """Retrieves at every decision step, as the paper does: before the turn's first decision
    (`before_turn`) and before each later one (`before_step`, once the tool results are in). The
    state is built exactly as the stored one (`trajectory_steps`): goal g = the customer's opening
    request, observation o = the current customer turn and the last tool result, both bounded. The
    source memory is switched off by the successful trajectories of the task's own domain. With
    withholding, each retrieved experience is drawn like an Orb, under the key "exp:<id>" so an
    experience and an Orb with the same id draw independently."""

    goal = ""

    def before_turn(self, *, turn: int, query: str, calls: list[dict] = (),
                    dialogue: list[dict] = ()) -> tuple[str, dict | None]:
        return self._step(turn=turn, step=0, query=query, calls=list(calls))

    def before_step(self, *, turn: int, step: int, query: str, calls: list[dict] = (),
                    dialogue: list[dict] = ()) -> tuple[str, dict | None]:
        return self._step(turn=turn, step=step, query=query, calls=list(calls))

    def _step(self, *, turn: int, step: int, query: str, calls: list[dict]) -> tuple[str, dict | None]:
        if not self.config.per_turn and (turn, step) != (1, 0):
            return self.block, None
        self.block, record = self.retrieve(turn=turn, query=query, calls=calls)
        return self.block, {"turn": turn, "step": step, "query": clipped(query, USER_TEXT_MAX_CHARS), **record}

    def observation(self, *, query: str, calls: list[dict]) -> str:
        return observation_text(user=query, tool=calls[-1]["content"] if calls else "")

    def retrieve(self, *, turn: int, query: str, calls: list[dict]) -> tuple[str, dict]:
        self.goal = self.goal or goal_text(query)
        observation = self.observation(query=query, calls=calls)
        result = experiences_retrieve(
            bank=self.bank, goal=self.goal, observation=observation, domain=self.task.get("domain", ""),
            client="evaluation", withhold=self._withheld,
            recent_actions=[action_text(c) for c in calls[-RECENT_ACTIONS:]])
        return result.prompt_block, {"dmrm": {
            "observation": observation, "after_calls": len(calls),
            "retrieval_id": result.retrieval_id, "prompt_block": result.prompt_block,
            "suppressed": result.suppressed, "budget_used": result.budget_used, "c_max": result.c_max,
            "min_similarity": result.min_similarity,
            "served_ids": [h.experience.pk for h in result.hits if h.included],
            "withheld_ids": [h.experience.pk for h in result.hits if h.withheld],
            "hits": [{"experience_id": h.experience.pk, "memory": h.memory, "score": round(h.score, 6),
                      "action": h.experience.action, "q_value": h.experience.q_value, "block": h.block}
                     for h in result.hits if h.included]}}

    def _withheld(self, experience_id: int) -> bool:
        return memory_withheld(key=self.config.withhold_key, memory_id=f"exp:{experience_id}",
                               probability=self.config.withhold_probability)


class DMRMLayer(BankedLayer):
    name, label = "dmrm", "DMRM"
    # Its experiences are flagged for review when measured to do harm, but the target memory is
    # served as it grows: the review gate never holds a trial back for it.
    reviewed = withholds = uses_dmrm_params = True
    trial_counters = (TrialCounter("DMRM steps written", "experiences_written"),)
    episode_partials = ("evaluation/memory_layers/_dmrm_episode.html",)

    def hook(self, *, config, task: dict, bank):
        return DMRMHook(config=config, task=task, bank=bank)

    def configure(self, *, run, spec, source) -> None:
        run.dmrm_config = dmrm_configure(run, spec)

    def learn_episode(self, *, play, episode, run) -> None:
        run_episode_dmrm_record(episode=episode, run=run)

    def stores_each_episode(self, run) -> bool:
        """Writing as each episode is stored: the trial's next episode must find this one's steps."""
        return dmrm_write_timing(run) == DMRMWriteTiming.EPISODE

    def memorise(self, *, run, trial) -> None:
        experiences_write(run, trial)

    def export_header(self, run) -> dict:
        return super().export_header(run) | {"dmrm": run.dmrm_config}

    def memory_link(self, run) -> tuple[str, str] | None:
        if run.bank is None:
            return None
        return ("its experiences",
                f"{reverse('orbs:experience_list')}?{urlencode({'bank': run.bank.slug})}")


def _c_max(spec, params: DMRMParams, environment_name: str) -> tuple[int | None, str]:
    """C_max to set on the run's bank and where it came from; None keeps a copied bank's own. An agent
    with no window of its own (the scripted one) is given the paper's 4k; the rest of its prompt is
    its environment's."""
    if params.c_max is not None:
        return params.c_max, "given"
    if params.c_max_rule == CMaxRule.MINILM_512:
        return 512, str(CMaxRule.MINILM_512)
    if spec.dmrm is None and spec.bank_source:
        return None, "the copied bank's"
    answer = spec.agent.max_tokens or role_config(EvaluationLLMRole.ACTOR).max_tokens
    room = memory_room(context_tokens=spec.agent.context_tokens or LLM_CONTEXT_TOKENS, answer_tokens=answer,
                       environment_name=environment_name)
    return max(16, min(room, MAX_C_MAX)), str(CMaxRule.AGENT_WINDOW)


def dmrm_configure(run, spec) -> dict:
    """The parameters in force, to keep on the run. The run's "approved only" then also gates
    the copied source memory."""
    params = spec.dmrm or DMRMParams()
    given = spec.dmrm.model_dump(exclude=_RUN_ONLY | {"c_max"}) if spec.dmrm else {}
    c_max, c_max_rule = _c_max(spec, params, run_environment(run).name)
    settings = dmrm_settings_update(bank=run.bank, params=given | ({"c_max": c_max} if c_max else {}))
    bank_policy_update(bank=run.bank, approved_only=spec.approved_only)
    bank_fields = {name: getattr(settings, name) for name in DMRMParams.model_fields if name not in _RUN_ONLY}
    return bank_fields | {"write_timing": str(params.write_timing), "c_max_rule": c_max_rule}


def dmrm_write_timing(run) -> str:
    """Runs stored before the choice existed wrote at trial end."""
    return (run.dmrm_config or {}).get("write_timing", DMRMWriteTiming.TRIAL_END)


def run_episode_dmrm_record(*, episode, run) -> None:
    """Inside the transaction that stores the episode: how its DMRM retrievals ended and, unless the
    run writes at trial end, its steps into the target memory, so the trial's later episodes can
    retrieve them (the paper's M_t grows as the agent acts). Exactly once per trajectory: a
    replayed store finds the episode's trajectory written."""
    ref = episode_ref(episode)
    dmrm_retrieval_outcome_record(retrieval_ids=[m["dmrm"]["retrieval_id"] for m in episode.memories if "dmrm" in m],
                                  success=episode.success, episode_ref=ref)
    finished = not episode.infra_error  # the trial end, too, writes only episodes that finished
    if finished and run.bank is not None and dmrm_write_timing(run) == DMRMWriteTiming.EPISODE:
        experiences_from_trajectory(bank=run.bank, trajectory=episode_trajectory(episode), trajectory_id=ref,
                                    run_ref=run.orb_label, episode_ref=ref)


def experiences_write(run, trial: Trial) -> None:
    """Each finished trajectory into DMRM's target memory, once (a trajectory is keyed by its
    episode): at trial end it writes what the episodes' stores did not (all of it when the run
    writes at trial end). The target memory is served as it grows, so the review gate does not
    hold it back. With withholding, experiences measured to do harm are flagged for review."""
    rows = list(finished_rows(trial))
    refs = [episode_ref(row.episode) for row in rows]
    # One batch for the trial: the same updates, in the same order, as writing each trajectory in turn.
    experiences_from_trajectories(bank=run.bank, trajectories=[
        TrajectoryToLearn(episode_trajectory(row.episode), ref, run_ref=run.orb_label, episode_ref=ref)
        for row, ref in zip(rows, refs)])
    Trial.objects.filter(pk=trial.pk).update(experiences_written=trajectories_steps(bank=run.bank, trajectory_ids=refs))
    if run.run_spec.withhold_probability:
        bank_harmful_experiences_flag(bank=run.bank, look=harm_look(run, trial))
