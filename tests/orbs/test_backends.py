"""The offline emotion tagger, reflector and rewriter, and their LLM paths through the fake server."""
import pytest

from memweb.models import LLMCall
from orbs.backends.emotion import emotion_tag, emotion_text, tag_offline
from orbs.backends.reflector import reflect_offline, reflection_write
from orbs.backends.rewriter import query_rewrite, rewrite_offline
from orbs.schemas import TrajectoryIn
from tests.orbs.conftest import success_trajectory, trajectory


@pytest.mark.parametrize(("text", "label"), [
    ("This is ridiculous, I want to speak to a manager.", "angry"),
    ("WHERE IS MY ORDER ALREADY", "angry"),
    ("It still doesn't work, this is the third time I'm writing.", "frustrated"),
    ("I'm worried it won't arrive in time for the party on Friday.", "anxious"),
    ("Sorry, I don't understand. Which one should I pick?", "confused"),
    ("Perfect, that works.", "satisfied"),
    ("Thank you so much, I really appreciate it!", "grateful"),
    ("Thanks, but it's still not working.", "frustrated"),
    ("I need the USB SKU for order W12.", "neutral"),
    ("Good morning, what is the price of the DW-450?", "neutral"),
    ("Not great, to be honest.", "frustrated"),
])
def test_it_tags_the_emotion_of_an_utterance(text, label):
    assert tag_offline(text) == label


# Issue 18: angry customers were labelled "grateful" (courtesy and sarcasm counted as thanks).
@pytest.mark.parametrize(("text", "label"), [
    ("Thanks for the help, but I want my money back NOW.", "angry"),
    ("I appreciate nothing about this service, it is a joke.", "angry"),
    ("Thanks, but my order is still not here. This is useless.", "angry"),
    ("I'm really annoyed. Where is my fridge?", "angry"),
    ("Thank you so much for wasting my afternoon!", "frustrated"),
    ("Oh great, thanks a lot, another week of waiting. Just perfect.", "frustrated"),
    ("Thanks for nothing. This is the third time I'm asking.", "frustrated"),
    ("Wow, thanks. Really helpful. My package is lost again.", "frustrated"),
    ("Thanks a lot, that was quick!", "grateful"),
])
def test_it_does_not_take_an_angry_or_sarcastic_customer_for_a_grateful_one(text, label):
    assert tag_offline(text) == label


def test_it_reads_the_feeling_before_a_closing_thank_you():
    angry = ["I'm really annoyed. My order O1 never came.", "It is O1.", "Thank you. ###STOP###"]
    assert tag_offline(emotion_text(angry)) == "angry"
    pleased = ["Hi. Where is order O1?", "Thank you, that's all I needed. ###STOP###"]
    assert tag_offline(emotion_text(pleased)) == "grateful"


def test_it_names_the_right_tool_after_a_wrong_tool_error():
    reflection = reflect_offline(TrajectoryIn.model_validate(trajectory()))
    assert reflection.startswith("Outcome: not resolved (reward 0; unmet: return_created)")
    assert "called `cancel_order`(order_id=W1001), the wrong tool" in reflection
    assert reflection.endswith("New plan: call `return_order` instead of `cancel_order` for this request.")


def test_it_names_the_argument_and_value_after_wrong_arguments():
    data = trajectory(
        messages=[{"role": "user", "content": "Where is my fridge, order W2004?"},
                  {"role": "assistant", "content": "",
                   "tool_calls": [{"name": "track_shipment", "arguments": {"order_id": "W2040"}}]},
                  {"role": "tool", "tool_name": "track_shipment", "content": '{"error": "not found"}'}],
        errors=[{"kind": "wrong_arguments", "tool": "track_shipment", "detail": "mistyped order id"}],
        metadata={"order_id": "W2004"}, reward_breakdown={"tracking_given": False},
    )
    reflection = reflect_offline(TrajectoryIn.model_validate(data))
    assert reflection.endswith("New plan: call `track_shipment` with order_id=W2004 (not W2040).")


def test_it_quotes_the_unused_tool_result():
    data = trajectory(
        messages=[{"role": "user", "content": "How long is the warranty on the VC-200?"},
                  {"role": "assistant", "content": "",
                   "tool_calls": [{"name": "get_product", "arguments": {"sku": "VC-200"}}]},
                  {"role": "tool", "tool_name": "get_product", "content": '{"sku": "VC-200", "warranty_years": 2}'},
                  {"role": "assistant", "content": "One year."}],
        errors=[{"kind": "result_unused", "tool": "get_product", "detail": ""}],
    )
    reflection = reflect_offline(TrajectoryIn.model_validate(data))
    assert "the result of `get_product` (sku=VC-200, warranty_years=2) was not used" in reflection


def test_it_records_the_tool_sequence_that_worked():
    reflection = reflect_offline(TrajectoryIn.model_validate(success_trajectory("Where is W1?")))
    assert reflection == (
        "Outcome: resolved (reward 1). What worked: `get_order`(order_id=W1). "
        "New plan: follow the same sequence for similar appliances requests."
    )


def test_it_rewrites_a_query_with_the_salient_context():
    rewritten = rewrite_offline(
        "Hi,  Please  tell me where my FRIDGE is",
        {"domain": "appliances", "sku": "FR-3300", "order_id": "W2004", "history": [
            {"role": "user", "content": "It was due Monday."}, {"role": "assistant", "content": "Checking."}]},
    )
    assert rewritten == "tell me where my fridge is; it was due monday; domain: appliances; sku: fr-3300"


def test_it_uses_the_llm_when_the_role_has_an_endpoint(fake_llm, db):
    fake_llm.use_for("reflector", "rewriter")
    fake_llm.reply_json({"label": "anxious"})
    fake_llm.reply_json({"reflection": "Call return_order, not cancel_order, for delivered items."})
    fake_llm.reply_json({"query": "return a damaged dishwasher"})
    emotion = emotion_tag(text="Is it going to arrive?")
    reflection = reflection_write(trajectory=TrajectoryIn.model_validate(trajectory()))
    rewrite = query_rewrite(query="customer has a broken dishwasher", context={"sku": "DW-450"})
    assert (emotion.value, emotion.backend) == ("anxious", "llm:fake-model")
    assert reflection.value == "Call return_order, not cancel_order, for delivered items."
    assert not reflection.is_scripted
    assert rewrite.value == "return a damaged dishwasher"
    # The reflector saw the whole trajectory, tool calls included.
    assert "cancel_order" in fake_llm.chat_requests[1]["messages"][-1]["content"]
    assert LLMCall.objects.filter(role="reflector", status=LLMCall.Status.OK).count() == 2


def test_it_falls_back_to_the_offline_backend_with_the_error_kept(fake_llm, db):
    fake_llm.use_for("reflector", max_retries=1)
    fake_llm.fail(500)
    fake_llm.fail(500)
    result = reflection_write(trajectory=TrajectoryIn.model_validate(trajectory()))
    assert result.backend == "scripted (LLM failed)"
    assert result.value == reflect_offline(TrajectoryIn.model_validate(trajectory()))
    assert "HTTP 500" in result.error


def test_it_falls_back_when_the_llm_answers_an_unknown_label(fake_llm, db):
    fake_llm.use_for("reflector")
    fake_llm.reply_json({"label": "euphoric"})
    fake_llm.reply_json({"label": "ecstatic"})
    result = emotion_tag(text="Thank you!")
    assert (result.value, result.backend) == ("grateful", "scripted (LLM failed)")
    assert "label" in result.error
