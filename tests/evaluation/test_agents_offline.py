"""The scripted agent and the agenda-based customer, played against each other offline."""
from evaluation.shop.customers import STOP, AgendaCustomer, render_intent
from evaluation.shop.episode import episode_play
from evaluation.shop.errors import ADVICE, ERROR_KINDS, MISLEADING_CUES, kinds_cued, kinds_misled
from evaluation.shop.nlu import parse_customer
from evaluation.shop.scripted_agent import ScriptedAgent
from tests.evaluation.conftest import play, task_by_template


def test_it_solves_every_task_with_zero_error_rates(shop_tasks):
    failed = [t["id"] for t in shop_tasks if not play(t).reward.success]
    assert failed == []


def test_it_fails_exactly_the_tasks_of_an_error_kind_made_always(shop_tasks):
    for kind in ERROR_KINDS:
        failed = {t["id"] for t in shop_tasks if not play(t, rates={kind: 1.0}).reward.success}
        exercising = {t["id"] for t in shop_tasks if kind in t["error_kinds"]}
        assert failed == exercising, kind


def test_it_diagnoses_the_error_kind_it_made(shop_tasks):
    for kind in ERROR_KINDS:
        task = next(t for t in shop_tasks if t["error_kinds"] == [kind] or
                    (kind == "wrong_tool" and kind in t["error_kinds"]))
        outcome = play(task, rates={kind: 1.0})
        assert outcome.committed == [kind]
        assert kind in {e["kind"] for e in outcome.errors}
        assert all(e["tool"] for e in outcome.errors)


def test_it_lists_the_customers_orders_or_searches_the_catalogue_by_mistake(shop_tasks):
    task = task_by_template(shop_tasks, "cancel_order_no_id")
    good, bad = play(task), play(task, rates={"wrong_tool": 1.0})
    assert "list_customer_orders" in [c["name"] for c in good.calls]
    assert "search_products" in [c["name"] for c in bad.calls]
    assert "list_customer_orders" not in [c["name"] for c in bad.calls]
    assert bad.errors[0]["tool"] == "search_products" and "list_customer_orders" in bad.errors[0]["detail"]


def test_it_replays_the_same_episode_for_the_same_seed(shop_tasks):
    rates = {kind: 0.5 for kind in ERROR_KINDS}
    for task in shop_tasks[::13]:
        first, again = play(task, seed=4, rates=rates), play(task, seed=4, rates=rates)
        assert first.messages == again.messages and first.calls == again.calls
        assert first.reward.breakdown == again.reward.breakdown


def test_it_makes_errors_at_roughly_the_configured_rate(shop_tasks):
    committed = [play(t, seed=9, rates={"result_unused": 0.5}).committed for t in shop_tasks
                 if "result_unused" in t["error_kinds"]]
    share = sum(bool(c) for c in committed) / len(committed)
    assert 0.3 < share < 0.7


class _Memory:
    def __init__(self, text: str):
        self.text, self.turns = text, []

    def before_turn(self, *, turn, query, calls, dialogue=()):
        self.turns.append(query)
        return self.text, {"turn": turn, "query": query, "hits": []}


def test_it_avoids_an_error_kind_when_a_memory_says_how(shop_tasks):
    for kind in ERROR_KINDS:
        task = next(t for t in shop_tasks if kind in t["error_kinds"])
        helped = play(task, rates={kind: 1.0}, memory=_Memory("Lesson: " + ADVICE[kind]))
        unrelated = play(task, rates={kind: 1.0}, memory=_Memory("Lesson: greet the customer warmly."))
        assert kind not in helped.committed and helped.reward.success, kind
        assert kind in unrelated.committed and not unrelated.reward.success, kind


def test_it_errs_when_a_memory_gives_bad_advice_even_with_good_advice_beside_it(shop_tasks):
    for kind in ERROR_KINDS:
        task = next(t for t in shop_tasks if kind in t["error_kinds"])
        bad = f"Lesson: {MISLEADING_CUES[kind][0]}. {ADVICE[kind]}"
        assert kinds_misled(bad) == {kind} and kind in kinds_cued(bad)
        misled = play(task, memory=_Memory(bad))  # no error planned: the memory alone causes it
        assert kind in misled.committed and not misled.reward.success, kind


def test_it_records_the_memories_retrieved_at_each_turn(shop_tasks):
    memory = _Memory("")
    outcome = play(shop_tasks[0], memory=memory)
    assert [m["turn"] for m in outcome.memories] == list(range(1, outcome.turns + 1))
    assert memory.turns[0] == outcome.messages[0]["content"]


def test_it_recognises_advice_in_reflections():
    assert kinds_cued("Next time: call `list_customer_orders` instead of `search_products`.") == {"wrong_tool"}
    assert kinds_cued("What worked: `cancel_order`(order_id=O1, reason=found_cheaper).") == {"wrong_arguments"}
    assert kinds_cued("Mistake: the result of `track_shipment` was not used in the reply.") == {"result_unused"}
    assert kinds_cued("The customer was happy.") == set()


def test_the_customer_only_answers_from_what_it_knows(shop_tasks):
    task = task_by_template(shop_tasks, "track_order_no_id")
    customer = AgendaCustomer(task=task, seed=0)
    customer.opening()
    answer = customer.respond("Could you give me the order number?")
    assert "don't have the order number" in answer and task["intents"][0]["slots"]["product"] in answer
    identity = customer.respond("Could you give me your email, phone number or customer ID?")
    assert next(iter(task["known"].values())) in identity


def test_the_customer_stops_when_its_agenda_is_done_or_its_patience_runs_out(shop_tasks):
    task = task_by_template(shop_tasks, "exchange_then_track")
    customer = AgendaCustomer(task=task, seed=0)
    customer.opening()
    assert STOP not in customer.respond("Done: your exchange is registered.")
    assert customer.respond("Your order is in transit; it arrives 2025-06-18.").endswith(STOP)
    impatient = AgendaCustomer(task=task, seed=0)
    impatient.opening()
    replies = [impatient.respond("Which colour was it again? Which size? Which date?") for _ in range(10)]
    assert any(STOP in r for r in replies)
    assert replies.index(next(r for r in replies if STOP in r)) < task["persona"]["patience"]


def test_a_refusing_agent_exhausts_the_customer_before_the_turn_limit(shop_tasks):
    class Refuser:
        label, tokens_in, tokens_out = "refuser", 0, 0

        def respond(self, *, text, memory, env):
            return "Sorry, I can't help. Could you give me the order number?"

    task = task_by_template(shop_tasks, "return_item_no_id")
    outcome = episode_play(task=task, agent=Refuser(), customer=AgendaCustomer(task=task, seed=0))
    assert outcome.ended_by == "stop" and outcome.turns < 12 and not outcome.reward.success


def test_the_agent_reads_back_what_the_customer_said(shop_tasks):
    rng = __import__("random").Random(0)
    for task in shop_tasks:
        for intent in task["intents"]:
            parsed = parse_customer(render_intent(intent, rng))
            assert parsed.intent == intent["kind"], (task["id"], intent)
            for key, value in intent["slots"].items():
                if key == "invoice_type" and value == "personal":
                    continue
                assert parsed.slots.get(key) == value, (task["id"], key)


def test_the_scripted_agent_confirms_before_every_change(shop_tasks):
    outcome = play(task_by_template(shop_tasks, "change_address", "clothing"))
    writes = [i for i, m in enumerate(outcome.messages) if any(c["name"] == "change_shipping_address"
                                                                for c in m.get("tool_calls", ()))]
    asked = [m for m in outcome.messages[:writes[0]] if m["role"] == "assistant" and "Shall I proceed?" in m["content"]]
    assert asked and outcome.messages[writes[0] - 1]["role"] == "user"
    assert ScriptedAgent(seed=0, key="x").planned == {k: False for k in ERROR_KINDS}
