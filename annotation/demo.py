"""Demo data: a small open campaign in two languages, four task formats and two
domains, with some judgments already made so the results page shows numbers.
Idempotent: nothing happens if the campaign exists. The demo annotators have
no usable password; they exist only to have judged."""
import random

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from annotation.models import Assignment, Campaign
from annotation.services import items_import, judgment_submit
from memweb.roles import Role

CAMPAIGN_NAME = "Demo: feedback comparison"
DEMO_ANNOTATORS = ("demo-annotator-1", "demo-annotator-2", "demo-annotator-3")
INSTRUCTIONS = """Each item shows a customer-service conversation and **two pieces of feedback** about the agent.

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
# The demo annotators judge these items completely; the other ready items stay
# open so a visitor can judge, and two wait for someone to write human feedback.
_JUDGED = ("demo:1", "demo:2", "demo:3", "demo:4", "demo:7")
# Each demo annotator sides with an item's "better" feedback this often, so agreement is plausible.
_AGREEMENT = 0.8


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
    campaign = Campaign.objects.create(name=CAMPAIGN_NAME, instructions=INSTRUCTIONS)
    records = [(row, _record(values)) for row, values in enumerate(_ITEMS, start=1)]
    report = items_import(campaign=campaign, records=records)
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
        "human_feedback": human, "simulated_feedback": simulated,
    }


def _annotators() -> list:
    users, group = get_user_model(), Group.objects.get_or_create(name=Role.ANNOTATOR)[0]
    people = []
    for name in DEMO_ANNOTATORS:
        user, created = users.objects.get_or_create(username=name)
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        user.groups.add(group)
        people.append(user)
    return people


def _judge_some(campaign: Campaign, people: list) -> None:
    """The demo annotators judge the chosen items (seeded, so every load is alike). Assignments
    are made directly, not by allocation, which would spread them over every item."""
    draw = random.Random(20240601)
    for item in campaign.items.filter(source_ref__in=_JUDGED).order_by("pk"):
        for person in people:
            assignment = Assignment.objects.create(campaign=campaign, item=item, annotator=person)
            choices = {key: _side(assignment, _preferred(assignment, key, draw)) for key in campaign.criterion_keys}
            judgment_submit(token=assignment.token, annotator=person, choices=choices,
                            time_spent_ms=draw.randint(20_000, 90_000))


def _preferred(assignment, criterion: str, draw: random.Random) -> str:
    better = "simulated" if random.Random(f"{assignment.item.source_ref}:{criterion}").random() < 0.55 else "human"
    worse = "human" if better == "simulated" else "simulated"
    return better if draw.random() < _AGREEMENT else worse


def _side(assignment, wanted: str) -> str:
    return "A" if assignment.source_of("A") == wanted else "B"
