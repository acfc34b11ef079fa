"""Each custom-score kind on stored episodes: rules pass and fail, bad settings refused naming the
field, and the LLM judge: offline not judged (no value made up), online through the fake OpenAI
server with a prompt that holds the conversation but nothing of the task's gold or verdict."""
import pytest

from evaluation.models import Episode
from evaluation.scores.kinds import PATTERN_CHARS, ScoreConfigInvalid, config_validated, episode_scored
from evaluation.scores.models import EpisodeScore

TRANSCRIPT = [
    {"role": "user", "content": "Where is my order #W123?", "turn": 1},
    {"role": "assistant", "content": None, "turn": 1,
     "tool_calls": [{"id": "c1", "name": "get_order_details", "arguments": {"order_id": "#W123"}}]},
    {"role": "tool", "tool_call_id": "c1", "tool_name": "get_order_details", "content": "shipped", "ok": True},
    {"role": "assistant", "content": "Your order has shipped. Thank you for waiting!", "turn": 1},
    {"role": "user", "content": "Thanks ###STOP###", "turn": 2},
]


def _episode(**fields) -> Episode:
    return Episode(**{"transcript": TRANSCRIPT, "turns": 2, "ended_by": Episode.EndedBy.STOP} | fields)


def _score(kind: str, config: dict, episode: Episode | None = None):
    return episode_scored(kind=kind, config=config_validated(kind, config), episode=episode or _episode())


@pytest.mark.parametrize(("config", "passed"), [
    ({"pattern": r"(?i)thank you", "mode": "must"}, True),
    ({"pattern": r"refund", "mode": "must"}, False),
    ({"pattern": r"refund", "mode": "must_not"}, True),
    ({"pattern": r"shipped", "mode": "must_not"}, False),
])
def test_reply_matches_reads_the_agents_replies(config, passed):
    result = _score("reply_matches", config)
    assert (result.status, result.passed, result.value) == ("scored", passed, 1.0 if passed else 0.0)
    assert config["pattern"] in result.explanation


def test_reply_matches_ignores_what_the_customer_said():
    assert not _score("reply_matches", {"pattern": "Where is my order"}).passed


@pytest.mark.parametrize(("config", "passed"), [
    ({"tool": "get_order_details"}, True),
    ({"tool": "cancel_order"}, False),
    ({"tool": "cancel_order", "mode": "must_not"}, True),
    ({"tool": "get_order_details", "mode": "must_not"}, False),
    ({"tool": "get_order_details", "min_count": 2}, False),
    ({"tool": "get_order_details", "min_count": 1, "max_count": 1}, True),
])
def test_tool_called_counts_the_calls_of_the_transcript(config, passed):
    assert _score("tool_called", config).passed is passed


def test_turns_at_most_and_ended_by():
    assert _score("turns_at_most", {"turns": 2}).passed
    assert not _score("turns_at_most", {"turns": 1}).passed
    assert _score("ended_by", {"ended_by": "stop"}).passed
    failed = _score("ended_by", {"ended_by": "transfer"}, _episode(ended_by=Episode.EndedBy.MAX_TURNS))
    assert (failed.passed, failed.value, failed.explanation) == (
        False, 0.0, "ended by turn limit; wanted transferred to a human")


@pytest.mark.parametrize(("kind", "config", "field", "words"), [
    ("reply_matches", {"pattern": "(unclosed"}, "pattern", "not a valid regular expression"),
    ("reply_matches", {"pattern": "a" * (PATTERN_CHARS + 1)}, "pattern", f"at most {PATTERN_CHARS} characters"),
    ("reply_matches", {"pattern": "ok", "mode": "maybe"}, "mode", "must be one of must, must_not"),
    ("tool_called", {}, "tool", "a tool name is required"),
    ("tool_called", {"tool": "t", "min_count": 3, "max_count": 2}, "max_count", "at least the minimum count (3)"),
    ("tool_called", {"tool": "t", "min_count": "two"}, "min_count", "whole number"),
    ("turns_at_most", {"turns": 0}, "turns", "at least 1"),
    ("ended_by", {"ended_by": "boredom"}, "ended_by", "must be one of stop"),
    ("llm_judge", {"rubric": " "}, "rubric", "a rubric is required"),
    ("llm_judge", {"rubric": "polite?", "scale": "1-10"}, "scale", "pass_fail, one_to_five"),
    ("dice", {}, "kind", "must be one of reply_matches"),
])
def test_bad_settings_are_refused_naming_the_field(kind, config, field, words):
    with pytest.raises(ScoreConfigInvalid) as refused:
        config_validated(kind, config)
    assert words in refused.value.errors[field]
    assert str(refused.value).startswith(f"{field}: ")


def test_an_offline_llm_judge_stores_not_judged_and_no_value(settings):
    assert settings.LLM_ROLES["scorer"].is_offline
    result = _score("llm_judge", {"rubric": "Was the agent polite?"})
    assert (result.status, result.value, result.passed) == (EpisodeScore.Status.NOT_JUDGED, None, None)
    assert "no LLM is configured" in result.explanation


GOLD_MARKERS = ("GOLD-ACTION-marker", "GOLD-OUTPUT-marker", "BREAKDOWN-marker", "DETAILS-marker")


def _episode_with_gold() -> Episode:
    """An episode whose task snapshot, verdict and reward details hold marker texts the judge must never see."""
    snapshot = {"id": "t-1", "required_actions": [{"name": "cancel_order", "arguments": {"reason": GOLD_MARKERS[0]}}],
                "required_outputs": [{"label": "code", "value": GOLD_MARKERS[1]}]}
    return _episode(task_snapshot=snapshot, success=True, reward=1.0, reward_breakdown={GOLD_MARKERS[2]: 1.0},
                    reward_details={"missing": [GOLD_MARKERS[3]]})


@pytest.mark.django_db  # LLM calls are recorded
def test_an_llm_judge_answers_through_the_scorer_role_and_sees_no_gold(fake_llm):
    fake_llm.use_for("scorer", model="judge-model")
    fake_llm.reply_json({"passed": True, "explanation": "The agent thanked the customer."})
    result = _score("llm_judge", {"rubric": "Did the agent thank the customer?"}, _episode_with_gold())
    assert (result.status, result.value, result.passed, result.judge) == ("scored", 1.0, True, "judge-model")
    assert result.explanation == "The agent thanked the customer."
    prompt = "\n".join(m["content"] for m in fake_llm.last_chat["messages"])
    assert "Did the agent thank the customer?" in prompt and "Your order has shipped" in prompt
    assert "get_order_details" in prompt and "###STOP###" not in prompt
    assert not [marker for marker in GOLD_MARKERS if marker in prompt]
    assert "reward" not in prompt.lower() and "success" not in prompt.lower()


@pytest.mark.django_db
def test_a_judge_grade_off_the_scale_is_an_error_not_a_value(fake_llm):
    fake_llm.use_for("scorer", model="judge-model")
    fake_llm.reply_json({"score": 9, "explanation": "great"})
    result = _score("llm_judge", {"rubric": "How helpful?", "scale": "one_to_five"})
    assert (result.status, result.value) == ("error", None)
    fake_llm.reply_json({"score": 4, "explanation": "helpful"})
    assert _score("llm_judge", {"rubric": "How helpful?", "scale": "one_to_five"}).value == 4.0
