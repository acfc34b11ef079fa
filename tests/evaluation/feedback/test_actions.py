"""Seeded action sampling on real episodes, the two noise controls and the copy model."""
import pytest

from evaluation.feedback.models import EpisodeFeedback
from evaluation.feedback.params import FeedbackParams
from evaluation.feedback.services import calibration_table, feedback_for_episode, profile_for
from tests.evaluation.feedback.conftest import play_many

# Far more acting users than the paper's 6.5 %, so a few dozen episodes show every effect.
ACTIVE = FeedbackParams(like_rate=0.3, dislike_rate=0.03)
FIELDS = ("score", "sampled_score", "action", "copied", "behavior", "reasoning", "response", "score_backend")


@pytest.fixture
def episodes(builtin):
    return play_many(builtin, 36)


def judge(episodes, *, seed: int = 7, params: FeedbackParams = ACTIVE) -> list[dict]:
    """Feedback for every episode, from scratch (rows of an earlier call are dropped)."""
    EpisodeFeedback.objects.all().delete()
    rows = [feedback_for_episode(episode=e, seed=seed, params=params) for e in episodes]
    return [{name: getattr(row, name) for name in FIELDS} for row in rows]


def test_it_reproduces_actions_from_the_seed_and_draws_each_episode_apart(episodes):
    first = judge(episodes)
    assert judge(episodes) == first
    assert {row["score"] for row in first} >= {4, 10} and {"like", "none"} <= {row["action"] for row in first}
    other = judge(episodes, seed=8)
    assert [r["action"] for r in other] != [r["action"] for r in first]
    assert [r["score"] for r in other] == [r["score"] for r in first]
    # One seed for the whole set, yet equal scores do not all get the same action.
    top = [r["action"] for r in first if r["score"] == 10]
    assert len(set(top)) > 1


def test_score_noise_moves_only_the_score_actions_are_drawn_from(episodes):
    plain = judge(episodes)
    noisy = judge(episodes, params=ACTIVE.model_copy(update={"score_sigma": 2.0}))
    for before, after in zip(plain, noisy):
        assert {k: after[k] for k in ("score", "behavior", "reasoning", "response")} == \
               {k: before[k] for k in ("score", "behavior", "reasoning", "response")}
        assert 1 <= after["sampled_score"] <= 10
        if after["sampled_score"] == before["score"]:
            # Same S, same independent draw: the noise stream never touches the action stream.
            assert (after["action"], after["copied"]) == (before["action"], before["copied"])
    moved = [a for a, b in zip(noisy, plain) if a["sampled_score"] != b["score"]]
    assert len(moved) >= 10
    assert all(r["sampled_score"] == r["score"] for r in plain)


def test_a_like_threshold_shift_changes_likes_only(episodes):
    shifted_params = ACTIVE.model_copy(update={"like_shift": 1.0})
    base, shifted = calibration_table(params=ACTIVE), calibration_table(params=shifted_params)
    assert [r["p_dislike"] for r in shifted.rows] == pytest.approx([r["p_dislike"] for r in base.rows], abs=1e-15)
    assert shifted.global_like == pytest.approx(base.global_like, abs=1e-12) == pytest.approx(0.3, abs=1e-12)
    assert shifted.rows[6]["p_like"] < base.rows[6]["p_like"] and shifted.rows[9]["p_like"] > base.rows[9]["p_like"]
    plain, selective = judge(episodes), judge(episodes, params=shifted_params)
    for before, after in zip(plain, selective):
        assert {k: v for k, v in after.items() if k not in ("action", "copied")} == \
               {k: v for k, v in before.items() if k not in ("action", "copied")}
    # Shared uniforms: where P(L|S) rose (S = 10), every earlier like stays a like.
    top = [(b["action"], a["action"]) for b, a in zip(plain, selective) if b["score"] == 10]
    assert all(after == "like" for before, after in top if before == "like")
    assert sum(a == "like" for _, a in top) > sum(b == "like" for b, _ in top)


def _profiles_long_output(value: bool) -> None:
    for key in ("appliances", "clothing"):
        profile = profile_for(key=key)
        profile.long_output = value
        profile.save(update_fields=["long_output"])


def test_short_output_profiles_never_copy(episodes):
    _profiles_long_output(True)
    long_rows = judge(episodes)
    assert any(r["copied"] for r in long_rows)
    _profiles_long_output(False)
    short_rows = judge(episodes)
    assert not any(r["copied"] for r in short_rows)
    assert [r["action"] for r in short_rows] == [r["action"] for r in long_rows]


def _make_final_reply_long(episode) -> None:
    """The episode's last agent reply runs to about 1,500 tokens (past the paper's 600)."""
    last = max(i for i, m in enumerate(episode.transcript) if m["role"] == "assistant" and m.get("content"))
    episode.transcript[last]["content"] = "Here is everything about your order in detail. " * 170
    episode.save(update_fields=["transcript"])


def test_copy_is_the_task_familys_rule_not_one_replys_length(builtin):
    """MemoryBench's long output is a property of a task's format: a shop family's replies are short
    even when one of them runs long, and every reply of a long-output family may be copied."""
    long_reply, short_reply = play_many(builtin, 2)
    _make_final_reply_long(long_reply)
    family = long_reply.task_snapshot["domain"]
    assert profile_for(key=family).long_output is False
    stored = feedback_for_episode(episode=long_reply, seed=1, params=ACTIVE).params
    assert (stored["long_output"], stored["long_output_rule"]) == (False, "task family")
    _profiles_long_output(True)
    assert feedback_for_episode(episode=short_reply, seed=1, params=ACTIVE).params["long_output"] is True
