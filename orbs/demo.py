"""Demo data: a bank of Orbs made by the real pipeline (offline emotion tagger and
reflector, real embeddings) from hand-written shop episodes in both domains.
Some are approved by the loader, some wait in the review queue. Idempotent:
the Orbs' hashes make a second run store nothing new."""
import json

from orbs.models import Orb
from orbs.services import bank_get_or_create, orb_approve, orb_from_episode, orbs_retrieve

BANK_NAME = "Demo shop"
SOURCE_LABEL = "demo episodes"


def _user(text: str) -> dict:
    return {"role": "user", "content": text}


def _agent(text: str, *calls: tuple[str, dict]) -> dict:
    return {"role": "assistant", "content": text, "tool_calls": [{"name": n, "arguments": a} for n, a in calls]}


def _tool(name: str, result: dict) -> dict:
    return {"role": "tool", "tool_name": name, "content": json.dumps(result)}


def _episode(task_id, domain, customer, messages, *, reward, breakdown, errors=(), **metadata) -> dict:
    return {"task_id": task_id, "domain": domain, "customer_key": customer, "messages": messages,
            "reward": reward, "success": reward >= 1.0, "reward_breakdown": breakdown,
            "errors": list(errors), "metadata": metadata}


def _jeans_exchange(customer: str, opening: str, closing: str) -> dict:
    return _episode("clothing-jeans-exchange", "clothing", customer, [
        _user(opening),
        _agent("Let me find that order.", ("get_order", {"order_id": "C5512"})),
        _tool("get_order", {"order_id": "C5512", "items": [{"sku": "JN-SLIM-32", "size": "32"}],
                            "status": "delivered"}),
        _agent("I can swap them for size 34 at no cost.",
               ("exchange_item", {"order_id": "C5512", "sku": "JN-SLIM-32", "new_size": "34"})),
        _tool("exchange_item", {"exchange_id": "EX-88", "ship_by": "tomorrow"}),
        _agent("Done: exchange EX-88, the size 34 pair ships tomorrow and a return label is in your email."),
        _user(closing),
    ], reward=1.0, breakdown={"exchange_created": True, "no_hallucination": True}, order_id="C5512", sku="JN-SLIM-32")


EPISODES = [
    (_episode("appliances-dishwasher-return", "appliances", "cust-1042", [
        _user("Hi, my dishwasher DW-450 arrived with a cracked door. I want to return it."),
        _agent("Sorry to hear that. Let me look up your order.", ("get_order", {"order_id": "W1001"})),
        _tool("get_order", {"order_id": "W1001", "items": [{"sku": "DW-450", "price": 499.0}], "status": "delivered"}),
        _agent("I have cancelled the order for you.", ("cancel_order", {"order_id": "W1001"})),
        _tool("cancel_order", {"error": "order already delivered"}),
        _user("Cancel? It is already here and broken. This is ridiculous."),
    ], reward=0.0, breakdown={"return_created": False, "no_hallucination": True},
        errors=[{"kind": "wrong_tool", "tool": "cancel_order",
                 "detail": "delivered orders are returned with return_order, not cancelled"}],
        sku="DW-450", order_id="W1001"), False),
    (_episode("appliances-quiet-washer", "appliances", "cust-2210", [
        _user("I'm looking for a quiet washing machine, my budget is 600 euros."),
        _agent("Let me search our washers under 600.",
               ("search_products", {"category": "washing_machine", "max_price": 600})),
        _tool("search_products", {"results": [{"sku": "WM-7721", "price": 579.0}, {"sku": "WM-6100", "price": 449.0}]}),
        _agent("Checking noise levels.", ("get_product", {"sku": "WM-7721"})),
        _tool("get_product", {"sku": "WM-7721", "noise_db": 47, "capacity_kg": 8, "price": 579.0}),
        _agent("The WM-7721 is our quietest under your budget: 47 dB while washing, 8 kg, 579 euros."),
        _user("Perfect, that sounds great."),
    ], reward=1.0, breakdown={"recommended_in_budget": True, "no_hallucination": True},
        sku="WM-7721", budget=600), True),
    (_episode("appliances-fridge-delay", "appliances", "cust-3307", [
        _user("My fridge order W2004 was supposed to come Monday and nothing arrived."),
        _agent("Let me track it.", ("track_shipment", {"order_id": "W2040"})),
        _tool("track_shipment", {"error": "order W2040 not found"}),
        _agent("I cannot find that order, could you check the number?"),
        _user("I'm worried, I need it before Friday, the old one is already gone. It's W2004!"),
    ], reward=0.0, breakdown={"tracking_given": False, "no_hallucination": True},
        errors=[{"kind": "wrong_arguments", "tool": "track_shipment",
                 "detail": "order_id W2040 was mistyped; the customer wrote W2004"}],
        order_id="W2004", sku="FR-3300"), False),
    (_episode("appliances-vacuum-warranty", "appliances", "cust-4120", [
        _user("How long is the warranty on the VC-200 vacuum?"),
        _agent("Let me check.", ("get_product", {"sku": "VC-200"})),
        _tool("get_product", {"sku": "VC-200", "warranty_years": 2, "price": 189.0}),
        _agent("It has a one-year warranty."),
        _user("Hmm, the box says two years. Which one is it?"),
    ], reward=0.0, breakdown={"correct_answer": False, "no_hallucination": False},
        errors=[{"kind": "result_unused", "tool": "get_product",
                 "detail": "the reply said one year while get_product returned warranty_years=2"}],
        sku="VC-200"), False),
    (_jeans_exchange("cust-5001", "Hi, the slim jeans I got are too small, can I swap the 32 for a 34?",
                     "Thank you so much, that was quick!"), True),
    (_episode("clothing-winter-jacket", "clothing", "cust-6022", [
        _user("I need a warm winter jacket under 150 dollars, but I'm not sure about sizes, "
              "I'm usually between M and L."),
        _agent("Let me look.", ("search_products", {"category": "jacket", "max_price": 150, "season": "winter"})),
        _tool("search_products", {"results": [{"sku": "JK-PUFF-NAVY", "price": 129.0, "fit": "relaxed"}]}),
        _agent("Checking stock.", ("check_stock", {"sku": "JK-PUFF-NAVY", "size": "M"})),
        _tool("check_stock", {"sku": "JK-PUFF-NAVY", "size": "M", "in_stock": 12}),
        _agent("The navy puffer JK-PUFF-NAVY is 129 dollars with a relaxed fit, so M works if you are between "
               "M and L; 12 in stock."),
        _user("Great, that works for me."),
    ], reward=1.0, breakdown={"recommended_in_budget": True, "size_advice": True},
        sku="JK-PUFF-NAVY", budget=150), True),
    (_episode("clothing-late-return", "clothing", "cust-7003", [
        _user("I want to return these sneakers, I bought them 45 days ago."),
        _agent("Let me check the order.", ("get_order", {"order_id": "C7710"})),
        _tool("get_order", {"order_id": "C7710", "items": [{"sku": "SN-RUN-42"}], "delivered_days_ago": 45,
                            "return_window_days": 30}),
        _agent("I'm sorry: returns are accepted within 30 days of delivery and this order arrived 45 days ago, "
               "so I can't open a return. I can offer a store credit for a defect claim if they are damaged."),
        _user("Seriously? That's annoying, I was travelling the whole month."),
    ], reward=1.0, breakdown={"policy_followed": True, "no_hallucination": True},
        order_id="C7710", sku="SN-RUN-42"), False),
    (_episode("clothing-dress-size", "clothing", "cust-8094", [
        _user("Please exchange my summer dress for a size M, the S is too tight."),
        _agent("Of course.", ("exchange_item", {"order_id": "C8120", "sku": "DR-SUM-S", "new_size": "L"})),
        _tool("exchange_item", {"exchange_id": "EX-91", "new_size": "L"}),
        _agent("Done, your size L is on its way."),
        _user("I said M, not L! Now I have to wait again, this is frustrating."),
    ], reward=0.0, breakdown={"exchange_created": False, "no_hallucination": True},
        errors=[{"kind": "wrong_arguments", "tool": "exchange_item",
                 "detail": "new_size should be M as the customer asked"}],
        order_id="C8120", sku="DR-SUM-S", new_size="M"), False),
    (_jeans_exchange("cust-5090", "Hello, the slim jeans I got are too small, can I swap the 32 for a 34?",
                     "Thank you so much, that was quick!"), False),
]

DEMO_QUERIES = [
    ("My fridge hasn't been delivered yet and I'm worried", {"domain": "appliances", "emotion": "anxious"}),
    ("The customer wants bigger jeans", {"domain": "clothing", "intent": "exchange"}),
]


def load_demo(stdout) -> None:
    bank = bank_get_or_create(name=BANK_NAME, description="Orbs from hand-written demo episodes (scripted backends).")
    created = 0
    for trajectory, approve in EPISODES:
        result = orb_from_episode(bank=bank, trajectory=trajectory, source_label=SOURCE_LABEL,
                                  episode_ref=trajectory["task_id"])
        created += result.created
        if approve and result.created and result.orb.status == Orb.Status.PENDING:
            orb_approve(orb_id=result.orb.pk, expected_version=result.orb.version, actor=None,
                        note="approved by the demo loader")
    if not bank.retrievals.exists():
        for query, context in DEMO_QUERIES:
            orbs_retrieve(bank=bank, query=query, context=context, client="demo")
    stdout.write(f"orbs: demo bank “{bank.name}” has {bank.orbs.count()} Orbs ({created} new).")
