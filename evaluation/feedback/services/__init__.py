"""Simulated user feedback on finished episodes (MemoryBench), one module per concern; callers
import from here. The design and its choices are described in docs/FEEDBACK_SIMULATION.md.

- profiles: who the simulated user is, per task family
- conversation: what is judged (the final reply and the history the customer saw), the ground truth
- critique, score, actions: the three parts of one judgement, each LLM or offline
- judging: one episode's feedback, stored once, with its later rounds (multi-turn feedback)
- revision: the agent's answer to a critique in a later round (scripted rule or the actor LLM)
- calibration: the action model's active parameters, its table, recalibration (to scores, or refit
  to people's actions in an annotation campaign), chart data
- selectors: feedback rows per run or selection, realised rates, the browser's filters
- to_memory: feedback into Orbs, off- and on-policy
"""
from evaluation.feedback.services.actions import action_model, action_sample, action_streams
from evaluation.feedback.services.calibration import (
    MIN_FIT_PAIRS,
    CalibrationTable,
    PeopleFit,
    calibration_curves,
    calibration_fit,
    calibration_histogram,
    calibration_recalibrate,
    calibration_refit,
    calibration_table,
    calibration_update,
)
from evaluation.feedback.services.conversation import Judged, episode_judged, evaluation_context
from evaluation.feedback.services.critique import Verbose, critique_llm, critique_offline
from evaluation.feedback.services.judging import MAX_FEEDBACK_ROUNDS, feedback_for_episode
from evaluation.feedback.services.profiles import profile_for, profiles_ensure_defaults
from evaluation.feedback.services.score import Satisfaction, score_llm, score_offline
from evaluation.feedback.services.selectors import (
    BACKEND_FILTERS,
    FeedbackRates,
    feedback_browse,
    feedback_of,
    feedback_rates,
    run_episodes,
    run_find,
    runs_all,
)
from evaluation.feedback.services.to_memory import (
    FeedbackBatch,
    feedback_offpolicy,
    feedback_onpolicy,
    feedback_to_orbs,
    feedback_trajectory,
)

__all__ = [
    "BACKEND_FILTERS", "MAX_FEEDBACK_ROUNDS", "MIN_FIT_PAIRS",
    "CalibrationTable", "FeedbackBatch", "FeedbackRates", "Judged", "PeopleFit",
    "Satisfaction", "Verbose", "action_model", "action_sample", "action_streams", "calibration_curves",
    "calibration_fit", "calibration_histogram", "calibration_recalibrate", "calibration_refit", "calibration_table",
    "calibration_update", "critique_llm", "critique_offline",
    "episode_judged", "evaluation_context", "feedback_browse", "feedback_for_episode", "feedback_of",
    "feedback_offpolicy", "feedback_onpolicy", "feedback_rates", "feedback_to_orbs", "feedback_trajectory",
    "profile_for", "profiles_ensure_defaults", "run_episodes", "run_find", "runs_all", "score_llm", "score_offline",
]
