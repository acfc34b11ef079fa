"""Demo data: an open campaign in two languages, four task formats and two
domains, with silent gold items, attention checks and judgments already made
(by honest demo annotators, one who always clicks "A" and one who clicks at
random) so every section of the results page shows numbers. All feedback,
judgments and ratings here are scripted, and the campaign says so.
Idempotent: nothing happens if the campaign exists. The demo annotators have
no usable password; they exist only to have judged."""
import math
import random

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from annotation.models import Assignment, Campaign
from annotation.services import items_import, judgment_submit, side_balanced
from memweb.models import memberships_grant
from memweb.roles import Role

CAMPAIGN_NAME = "Demo: feedback comparison (scripted)"
HONEST = ("demo-annotator-1", "demo-annotator-2", "demo-annotator-3", "demo-annotator-4")
ALWAYS_A, AT_RANDOM = "demo-always-a", "demo-random"
DEMO_ANNOTATORS = (*HONEST, ALWAYS_A, AT_RANDOM)
INSTRUCTIONS = """*Demo campaign: every conversation, feedback, judgment and rating in it is scripted by memweb,
not written by people.*

Each item shows a customer-service conversation and **two pieces of feedback** about the agent.

1. Read the conversation (and the evaluation context, which says what a correct answer needed).
2. For every criterion, pick the feedback that is better, **A** or **B**.
3. Add a comment if something stood out.

The two sides are shuffled for every item."""

_ITEMS = [
    ("demo:1", "en", "SiSo", "appliances",
     [("user", "Is the Aquaflow 300 dishwasher in stock?"), ("assistant", "Yes, we have 4 units.")],
     "Ask whether a dishwasher model is in stock.", "Stock for AQ-300: 4 units.",
     "Quick and correct, that's all I needed.", "The agent answered the stock question correctly and briefly."),
    ("demo:2", "en", "LiLo", "clothing",
     [("user", "I ordered a wool coat in size M, order 1042, but it is too small. Can I exchange it for an L "
               "and keep the same colour? I also want to know whether the exchange costs shipping."),
      ("assistant", "You can return the coat within 30 days.")],
     "Exchange a coat for a larger size and ask about shipping costs.",
     "Order 1042: coat, size M, navy. Exchanges are free; size L navy is in stock.",
     "You told me about returns but I asked for an exchange, and you skipped the shipping question.",
     "The response does not address the exchange request or the shipping cost; it only mentions the return window."),
    ("demo:3", "zh", "SiLo", "appliances",
     [("user", "这台空气净化器怎么清洁滤网？"), ("assistant", "请每月用清水冲洗滤网，晾干后再装回。")],
     "询问空气净化器滤网的清洁方法。", "HEPA 滤网不可水洗，只能更换；预滤网可以水洗。",
     "你说用水冲洗，可是说明书上写 HEPA 滤网不能洗。", "回答把 HEPA 滤网和预滤网混为一谈，给出了错误的清洁方法。"),
    ("demo:4", "zh", "LiSo", "clothing",
     [("user", "我上周买的连衣裙订单号 2088，收到时有一处开线，能退款吗？"), ("assistant", "可以，已为您申请全额退款。")],
     "因商品瑕疵申请退款。", "订单 2088 在 7 天内，瑕疵商品可全额退款。",
     "处理得很快，谢谢。", "客服正确地确认了退款资格并直接办理，回答简洁。"),
    ("demo:5", "en", "LiSo", "appliances",
     [("user", "My fridge, bought in March under order 3310, makes a loud buzzing noise at night. Is that covered?"),
      ("assistant", "A buzzing fridge is usually normal.")],
     "Ask whether a noisy fridge is covered by warranty.",
     "Order 3310 is within the 2-year warranty; noise faults are covered.",
     "", "The agent dismissed the complaint without checking the warranty, which covers this fault."),
    ("demo:6", "zh", "SiSo", "clothing",
     [("user", "这件衬衫有白色吗？"), ("assistant", "有的，白色各尺码都有货。")],
     "询问衬衫颜色库存。", "衬衫白色：S、M、L 均有货。",
     "", "回答准确，直接说明了白色有货。"),
    ("demo:7", "en", "SiLo", "clothing",
     [("user", "How should I wash a merino jumper?"),
      ("assistant", "Hand wash it in cold water with wool detergent, do not wring it, and dry it flat away from heat. "
                    "A machine wool cycle at 30 °C also works if the label allows it.")],
     "Ask for care instructions for a merino jumper.", "Merino: hand or wool cycle at 30 °C max, dry flat.",
     "Really thorough, and the bit about drying flat saved my last jumper.",
     "The instructions are complete and match the care label; the answer is clear."),
    ("demo:8", "zh", "LiLo", "appliances",
     [("user", "我家的洗衣机订单 5120 安装后一直漏水，师傅说是进水管的问题，我想知道能不能上门更换，费用怎么算，需要等多久？"),
      ("assistant", "可以安排上门更换进水管，保修期内免费，一般 2 到 3 个工作日内上门。")],
     "洗衣机漏水，询问上门维修的费用和时间。", "订单 5120 在保修期内：进水管免费更换，2–3 个工作日上门。",
     "回答把我问的三件事都说清楚了。", "客服回答了能否上门、费用和等待时间，信息与保修政策一致。"),
]
# Simulated satisfaction of each hand-written item (the simulator is a little more positive than people).
_SIMULATED_SCORES = {"demo:1": 9, "demo:2": 4, "demo:3": 5, "demo:4": 9, "demo:5": 5, "demo:6": 9, "demo:7": 10,
                     "demo:8": 9}
# Scripted conversations: (language, domain, request, reply, resolved, human feedback, simulated feedback).
_SCRIPTED = [
    ("en", "appliances", "Does the Breeze 20 fan have a timer?", "Yes, up to 8 hours.", True,
     "Straight answer, thanks.", "The agent confirmed the timer and its range."),
    ("en", "clothing", "Can I return socks I have worn once?", "All items can be returned within 30 days.", False,
     "That's wrong, worn socks can't go back. You didn't check.", "The reply overlooks the hygiene exception."),
    ("zh", "appliances", "电饭煲的内胆可以放洗碗机吗？", "可以，内胆支持洗碗机清洗。", True,
     "回答很清楚。", "客服准确回答了内胆能否机洗。"),
    ("zh", "clothing", "羽绒服可以机洗吗？", "羽绒服都不能水洗。", False,
     "标签上写可以机洗，你说错了。", "回答与洗涤标签不符。"),
    ("en", "appliances", "My kettle stopped heating after a week, order 7731.", "Please descale it with vinegar.", False,
     "A week-old kettle is faulty, I wanted a replacement, not cleaning tips.",
     "The agent suggested descaling instead of offering the replacement the warranty allows."),
    ("en", "clothing", "Is the linen shirt in size S back in stock?", "Yes, it arrived today.", True,
     "Great, ordering now.", "The stock answer was correct and direct."),
    ("zh", "appliances", "微波炉订单 6610 什么时候发货？", "订单 6610 已于今天发货，预计两天送达。", True,
     "很及时，谢谢。", "客服给出了准确的发货和送达时间。"),
    ("zh", "clothing", "裤子太长了，可以免费改短吗？", "抱歉，我们不提供改衣服务。", False,
     "页面上写了免费改短，你没查清楚。", "回答忽略了免费改短服务。"),
]
_FORMATS = ("SiSo", "LiSo", "SiLo", "LiLo")
_GOLD = [
    ("demo:gold:1", "en", [("user", "Where is my order 4410?"), ("assistant", "It was delivered yesterday at 14:02.")],
     "Delivery tracking.", "Order 4410: delivered yesterday 14:02.",
     "Correct and precise, I found the parcel.", "The agent talked about something unrelated to tracking.",
     {"relevance": "human"}),
    ("demo:gold:2", "zh", [("user", "这件外套有黑色吗？"), ("assistant", "有，黑色 M 和 L 有货。")],
     "询问颜色库存。", "外套黑色：M、L 有货。",
     "我问的是颜色。", "客服准确说明了黑色的库存尺码，回答直接。", {"relevance": "simulated"}),
]
_ATTENTION = [
    ("demo:check:1", "en", "The weather in Lisbon is sunny today.", "human"),
    ("demo:check:2", "zh", "", "simulated"),
    ("demo:check:3", "en", "Lorem ipsum dolor sit amet.", "human"),
]
# Each honest demo annotator sides with an item's "better" feedback this often, so agreement is plausible.
_AGREEMENT = 0.85
# Items left unjudged so a visitor can judge, and two that wait for someone to write human feedback.
_OPEN = ("demo:7", "demo:8")


def load_demo(stdout) -> None:
    if Campaign.objects.filter(name=CAMPAIGN_NAME).exists():
        stdout.write(f"annotation: demo campaign “{CAMPAIGN_NAME}” already exists")
        return
    with transaction.atomic():
        campaign = _campaign()
        people = _annotators()
        _judge_some(campaign, people)
    stdout.write(f"annotation: created demo campaign “{CAMPAIGN_NAME}” with {campaign.items.count()} items")


def _campaign() -> Campaign:
    campaign = Campaign.objects.create(name=CAMPAIGN_NAME, instructions=INSTRUCTIONS, attention_rate=0.15,
                                       attention_min_checks=2)
    records = [_record(values) for values in _ITEMS] + _scripted_records() + _gold_records() + _attention_records()
    report = items_import(campaign=campaign, records=list(enumerate(records, start=1)))
    if not report.ok:
        raise RuntimeError(f"demo items are invalid: {report.problems}")
    campaign.status_set(Campaign.Status.OPEN)
    return campaign


def _record(values: tuple) -> dict:
    ref, language, task_format, domain, turns, task, context, human, simulated = values
    return {
        "source_ref": ref, "language": language, "task_format": task_format, "domain": domain,
        "conversation": [{"role": role, "content": content} for role, content in turns],
        "task_description": task, "evaluation_context": context,
        "human_feedback": human, "simulated_feedback": simulated, **_simulated_user(_SIMULATED_SCORES[ref], ref),
    }


def _simulated_user(score: int, ref: str) -> dict:
    """The simulated user's score, P(like) and sampled action, from a like curve rising with the score."""
    p_like = round(0.9 / (1 + math.exp(-1.5 * (score - 7.5))), 3)
    p_dislike = round(0.8 / (1 + math.exp(1.5 * (score - 4.0))), 3)
    draw = random.Random(f"action:{ref}").random()
    action = "like" if draw < p_like else "dislike" if draw < p_like + p_dislike else "none"
    return {"simulated_score": score, "simulated_like_probability": p_like, "simulated_action": action}


def _scripted_records() -> list[dict]:
    records = []
    for copy in range(3):
        for index, (language, domain, request, reply, resolved, human, simulated) in enumerate(_SCRIPTED):
            ref = f"demo:scripted:{copy}:{index}"
            score = min(10, (8 if resolved else 3) + copy)
            records.append({
                "source_ref": ref, "language": language, "domain": domain,
                "task_format": _FORMATS[(index + copy) % len(_FORMATS)],
                "conversation": [{"role": "user", "content": request}, {"role": "assistant", "content": reply}],
                "task_description": request, "evaluation_context": "resolved" if resolved else "not resolved",
                "human_feedback": human, "simulated_feedback": simulated, **_simulated_user(score, ref),
            })
    return records


def _gold_records() -> list[dict]:
    return [{"source_ref": ref, "language": language, "task_format": "SiSo", "domain": "clothing",
             "conversation": [{"role": role, "content": content} for role, content in turns],
             "task_description": task, "evaluation_context": context, "human_feedback": human,
             "simulated_feedback": simulated, "is_gold": True, "gold_expected": expected}
            for ref, language, turns, task, context, human, simulated, expected in _GOLD]


def _attention_records() -> list[dict]:
    """Checks with a plain answer: one side is off-topic or empty, the other addresses the conversation."""
    records = []
    for ref, language, nonsense, sensible in _ATTENTION:
        good = ("The agent answered the question and gave the delivery date." if language == "en"
                else "客服回答了问题并给出了送达日期。")
        bad = nonsense or "—"
        human, simulated = (good, bad) if sensible == "human" else (bad, good)
        records.append({"source_ref": ref, "language": language, "task_format": "SiSo", "domain": "appliances",
                        "conversation": [{"role": "user", "content": "When will my order arrive?"},
                                         {"role": "assistant", "content": "On Friday."}],
                        "human_feedback": human, "simulated_feedback": simulated, "is_attention": True,
                        "gold_expected": {key: sensible for key in ("naturalness", "relevance", "overall_quality")}})
    return records


def _annotators() -> list:
    users, group = get_user_model(), Group.objects.get_or_create(name=Role.ANNOTATOR)[0]
    people = []
    for name in DEMO_ANNOTATORS:
        user, created = users.objects.get_or_create(username=name)
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        user.groups.add(group)
        memberships_grant(user=user, roles=[Role.ANNOTATOR])
        people.append(user)
    return people


def _judge_some(campaign: Campaign, people: list) -> None:
    """Three honest demo annotators per ready item, plus one of the two clickers on most of them (an
    extra judgment the results drop once the clicker is excluded), and everyone on every check.
    Seeded, so every load is alike. Assignments are made directly, not by allocation, which would
    spread them over every item and stop at N."""
    draw = random.Random(20240601)
    honest, clickers = people[:len(HONEST)], people[len(HONEST):]
    ready = campaign.items.exclude(human_feedback="").exclude(source_ref__in=_OPEN).order_by("pk")
    for position, item in enumerate(ready):
        judges = [honest[(position + offset) % len(honest)] for offset in range(3)] + [clickers[position % 2]]
        for person in people if item.is_attention else judges:
            assignment = Assignment.objects.create(campaign=campaign, item=item, annotator=person,
                                                   side_a_is_human=side_balanced(item=item, draw=draw))
            choices = {key: _choice(assignment, key, draw) for key in campaign.criterion_keys}
            score, action = _rating(item, person.username, draw)
            judgment_submit(token=assignment.token, annotator=person, choices=choices,
                            time_spent_ms=draw.randint(20_000, 90_000), score=score, action=action)


def _choice(assignment, criterion: str, draw: random.Random) -> str:
    name = assignment.annotator.username
    if name == ALWAYS_A:
        return "A"
    if name == AT_RANDOM:
        return draw.choice(("A", "B"))
    return _side(assignment, _preferred(assignment, criterion, draw))


def _preferred(assignment, criterion: str, draw: random.Random) -> str:
    item = assignment.item
    if item.is_attention:
        return item.gold_expected[criterion]  # the answer is plain to anyone who reads it
    if item.gold_expected.get(criterion):
        better = item.gold_expected[criterion]
    else:
        better = "simulated" if random.Random(f"{item.source_ref}:{criterion}").random() < 0.55 else "human"
    worse = "human" if better == "simulated" else "simulated"
    return better if draw.random() < _AGREEMENT else worse


def _rating(item, name: str, draw: random.Random) -> tuple[int | None, str]:
    """A scripted person's own rating: around a point under the simulated score (people are less positive)."""
    if item.simulated_score is None or name in (ALWAYS_A, AT_RANDOM):
        return None, ""
    score = max(1, min(10, item.simulated_score - 1 + draw.choice((-1, 0, 0, 1))))
    action = "like" if score >= 8 and draw.random() < 0.7 else "dislike" if score <= 4 and draw.random() < 0.7 else "none"
    return score, action


def _side(assignment, wanted: str) -> str:
    return "A" if assignment.source_of("A") == wanted else "B"
