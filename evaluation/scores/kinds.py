"""The kinds of custom score: each validates its settings (errors name the field) and scores one stored
episode deterministically from its transcript, turns and ending — except the LLM judge, whose answer
comes from the scorer role and, offline, is "not judged", never made up.

The judge reads only what was said and done in the conversation (customer and agent turns, the tool
calls made); the task's gold actions, expected outputs and outcome are never put in its prompt.
"""
import re
from dataclasses import dataclass

from pydantic import BaseModel, Field

from evaluation.environments import STOP
from evaluation.models import Episode
from evaluation.scores.models import EpisodeScore, ScoreKind
from evaluation.vocabulary import EvaluationLLMRole
from memweb.llm import LLMError, llm_json, role_config

PATTERN_CHARS = 200  # longer patterns are refused: the cost of a pathological regex grows with both lengths
REPLY_CHARS = 5000  # each reply is matched on its first characters only, for the same reason
RUBRIC_CHARS = 2000
TOOL_NAME_CHARS = 100
MODES = ("must", "must_not")
SCALES = {"pass_fail": "pass / fail", "one_to_five": "1 to 5"}
JUDGE_TRANSCRIPT_CHARS = 12000  # a judge prompt's room for the conversation; longer ones are cut, saying so


class ScoreConfigInvalid(ValueError):
    """Settings that do not make a score; `errors` maps each field to what is wrong with it."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__("; ".join(f"{field}: {message}" for field, message in errors.items()))


@dataclass(frozen=True)
class ScoreResult:
    status: str
    value: float | None = None
    passed: bool | None = None
    explanation: str = ""
    judge: str = ""


def _verdict(ok: bool, explanation: str) -> ScoreResult:
    return ScoreResult(status=EpisodeScore.Status.SCORED, value=1.0 if ok else 0.0, passed=ok, explanation=explanation)


# --- validation -------------------------------------------------------------------------

def _mode(config: dict, errors: dict) -> str:
    mode = config.get("mode") or "must"
    if mode not in MODES:
        errors["mode"] = f"must be one of {', '.join(MODES)}, not {mode!r}"
    return mode


def _count(config: dict, field: str, errors: dict, *, minimum: int) -> int | None:
    raw = config.get(field)
    if raw in (None, ""):
        return None
    try:
        number = int(raw)
    except (TypeError, ValueError):
        errors[field] = f"must be a whole number, not {raw!r}"
        return None
    if number < minimum:
        errors[field] = f"must be at least {minimum}"
        return None
    return number


def _reply_matches(config: dict, errors: dict) -> dict:
    pattern = str(config.get("pattern") or "")
    if not pattern:
        errors["pattern"] = "a regular expression is required"
    elif len(pattern) > PATTERN_CHARS:
        errors["pattern"] = f"at most {PATTERN_CHARS} characters (this one has {len(pattern)})"
    else:
        try:
            re.compile(pattern)
        except re.error as exc:
            errors["pattern"] = f"not a valid regular expression: {exc}"
    return {"pattern": pattern, "mode": _mode(config, errors)}


def _tool_called(config: dict, errors: dict) -> dict:
    tool = str(config.get("tool") or "").strip()
    if not tool:
        errors["tool"] = "a tool name is required"
    elif len(tool) > TOOL_NAME_CHARS:
        errors["tool"] = f"at most {TOOL_NAME_CHARS} characters"
    mode = _mode(config, errors)
    low, high = _count(config, "min_count", errors, minimum=1), _count(config, "max_count", errors, minimum=1)
    if mode == "must_not" and (low or high):
        errors["min_count"] = "counts apply only when the tool must be called"
    elif low and high and low > high:
        errors["max_count"] = f"must be at least the minimum count ({low})"
    return {"tool": tool, "mode": mode, "min_count": low, "max_count": high}


def _turns_at_most(config: dict, errors: dict) -> dict:
    turns = _count(config, "turns", errors, minimum=1)
    if turns is None and "turns" not in errors:
        errors["turns"] = "a number of turns is required"
    return {"turns": turns}


def _ended_by(config: dict, errors: dict) -> dict:
    ended_by = config.get("ended_by") or ""
    if ended_by not in Episode.EndedBy.values:
        errors["ended_by"] = f"must be one of {', '.join(Episode.EndedBy.values)}, not {ended_by!r}"
    return {"ended_by": ended_by}


def _llm_judge(config: dict, errors: dict) -> dict:
    rubric = str(config.get("rubric") or "").strip()
    if not rubric:
        errors["rubric"] = "a rubric is required: what the judge should check"
    elif len(rubric) > RUBRIC_CHARS:
        errors["rubric"] = f"at most {RUBRIC_CHARS} characters (this one has {len(rubric)})"
    scale = config.get("scale") or "pass_fail"
    if scale not in SCALES:
        errors["scale"] = f"must be one of {', '.join(SCALES)}, not {scale!r}"
    return {"rubric": rubric, "scale": scale}


VALIDATORS = {ScoreKind.REPLY_MATCHES: _reply_matches, ScoreKind.TOOL_CALLED: _tool_called,
              ScoreKind.TURNS_AT_MOST: _turns_at_most, ScoreKind.ENDED_BY: _ended_by, ScoreKind.LLM_JUDGE: _llm_judge}


def config_validated(kind: str, config: dict) -> dict:
    """The kind's settings, cleaned (only its own fields kept); ScoreConfigInvalid names each bad field."""
    if kind not in VALIDATORS:
        raise ScoreConfigInvalid({"kind": f"must be one of {', '.join(ScoreKind.values)}, not {kind!r}"})
    if not isinstance(config, dict):
        raise ScoreConfigInvalid({"config": "must be an object of the kind's settings"})
    errors: dict[str, str] = {}
    cleaned = VALIDATORS[kind](config, errors)
    if errors:
        raise ScoreConfigInvalid(errors)
    return cleaned


# --- scoring ---------------------------------------------------------------------------

def _replies(episode: Episode) -> list[str]:
    return [m["content"] for m in episode.transcript if m.get("role") == "assistant" and m.get("content")]


def _tool_names(episode: Episode) -> list[str]:
    return [call.get("name", "") for m in episode.transcript if m.get("role") == "assistant"
            for call in m.get("tool_calls") or ()]


def _score_reply_matches(config: dict, episode: Episode) -> ScoreResult:
    pattern = re.compile(config["pattern"])
    matched = sum(1 for reply in _replies(episode) if pattern.search(reply[:REPLY_CHARS]))
    if config["mode"] == "must":
        return _verdict(matched > 0, f"{matched} agent repl{'y' if matched == 1 else 'ies'} matched /{config['pattern']}/")
    return _verdict(matched == 0, f"{matched} agent repl{'y' if matched == 1 else 'ies'} matched "
                                  f"/{config['pattern']}/, which must not match")


def _score_tool_called(config: dict, episode: Episode) -> ScoreResult:
    count = _tool_names(episode).count(config["tool"])
    said = f"{config['tool']} called {count} time{'' if count == 1 else 's'}"
    if config["mode"] == "must_not":
        return _verdict(count == 0, f"{said}; it must not be")
    low, high = config.get("min_count") or 1, config.get("max_count")
    bounds = f"at least {low}" + (f" and at most {high}" if high else "")
    return _verdict(low <= count and (high is None or count <= high), f"{said}; wanted {bounds}")


def _score_turns_at_most(config: dict, episode: Episode) -> ScoreResult:
    return _verdict(episode.turns <= config["turns"], f"{episode.turns} turns; at most {config['turns']} wanted")


def _score_ended_by(config: dict, episode: Episode) -> ScoreResult:
    wanted = Episode.EndedBy(config["ended_by"]).label
    return _verdict(episode.ended_by == config["ended_by"], f"ended by {episode.get_ended_by_display()}; wanted {wanted}")


JUDGE_SYSTEM = ("You grade one customer-service conversation against a rubric. You see only the conversation: "
                "what the customer and the agent said and the tools the agent called. Explain your grade in one or "
                "two sentences.")


class PassFailVerdict(BaseModel):
    passed: bool = Field(description="Whether the conversation meets the rubric")
    explanation: str = Field(description="Why, in one or two sentences")


class ScaleVerdict(BaseModel):
    score: int = Field(description="The grade, from 1 (worst) to 5 (best)")
    explanation: str = Field(description="Why, in one or two sentences")


def judge_transcript(episode: Episode) -> str:
    """The conversation as the judge reads it: turns and tool calls in order, nothing from the task."""
    lines = []
    for message in episode.transcript:
        role, content = message.get("role"), (message.get("content") or "").replace(STOP, "").strip()
        if role == "user" and content:
            lines.append(f"Customer: {content}")
        elif role == "assistant":
            lines += [f"Agent calls tool {call.get('name', '')} with {call.get('arguments') or {}}"
                      for call in message.get("tool_calls") or ()]
            if content:
                lines.append(f"Agent: {content}")
    text = "\n".join(lines) or "(the conversation is empty)"
    return text if len(text) <= JUDGE_TRANSCRIPT_CHARS else text[:JUDGE_TRANSCRIPT_CHARS] + "\n(conversation cut here)"


def judge_messages(config: dict, episode: Episode) -> list[dict]:
    scale = ("Answer whether it passes." if config["scale"] == "pass_fail"
             else "Grade it from 1 (does not meet the rubric at all) to 5 (meets it fully).")
    return [{"role": "system", "content": JUDGE_SYSTEM},
            {"role": "user", "content": f"Rubric:\n{config['rubric']}\n\n{scale}\n\nConversation:\n"
                                        f"{judge_transcript(episode)}"}]


def _score_llm_judge(config: dict, episode: Episode) -> ScoreResult:
    settings = role_config(EvaluationLLMRole.SCORER)
    if settings.is_offline:
        return ScoreResult(status=EpisodeScore.Status.NOT_JUDGED,
                           explanation="Not judged: no LLM is configured for the scorer role.")
    pass_fail = config["scale"] == "pass_fail"
    try:
        answer = llm_json(role=EvaluationLLMRole.SCORER, messages=judge_messages(config, episode),
                          schema=PassFailVerdict if pass_fail else ScaleVerdict)
    except LLMError as exc:
        return ScoreResult(status=EpisodeScore.Status.ERROR, explanation=str(exc), judge=settings.model)
    if pass_fail:
        return ScoreResult(status=EpisodeScore.Status.SCORED, value=1.0 if answer.passed else 0.0,
                           passed=answer.passed, explanation=answer.explanation, judge=settings.model)
    if not 1 <= answer.score <= 5:
        return ScoreResult(status=EpisodeScore.Status.ERROR, judge=settings.model,
                           explanation=f"The judge answered {answer.score}, outside the scale 1 to 5.")
    return ScoreResult(status=EpisodeScore.Status.SCORED, value=float(answer.score), explanation=answer.explanation,
                       judge=settings.model)


SCORERS = {ScoreKind.REPLY_MATCHES: _score_reply_matches, ScoreKind.TOOL_CALLED: _score_tool_called,
           ScoreKind.TURNS_AT_MOST: _score_turns_at_most, ScoreKind.ENDED_BY: _score_ended_by,
           ScoreKind.LLM_JUDGE: _score_llm_judge}


def episode_scored(*, kind: str, config: dict, episode: Episode) -> ScoreResult:
    return SCORERS[kind](config, episode)
