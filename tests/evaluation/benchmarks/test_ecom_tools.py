"""Each of ECom-Bench's 21 tools, its success and its error paths, on a private copy of the
benchmark's database. An error is the tool's answer (ok=False, "Error: <the benchmark's text>"), never
an exception."""
import json

import pytest

from evaluation.environments.ecom_bench import tools
from evaluation.environments.ecom_bench.tools import OFFLINE_IMAGE_ANSWER, image_describer_set, tool_run
from tests.evaluation.benchmarks.ecom_support import PLATFORM, SHOP, USER, database, ecom_source  # noqa: F401

ON = {"platform": PLATFORM, "shop_id": SHOP}
MINE = {**ON, "user_id": USER}
PAID, TWO_ITEMS = "313021098954", "313271663680"  # the customer's orders: one item; two items, 已付款 both
HEATER, NO_AUX = "100042754736", "100112573625"  # a water heater; a product with no auxiliary materials
OTHER = {"platform": PLATFORM, "shop_id": SHOP, "user_id": "cnjdii星星ii", "order_id": "316123105676"}


def order(db: dict, order_id: str, user: str = USER) -> dict:
    return db["orders"][PLATFORM][SHOP][user][order_id]


def balance(db: dict, user: str = USER):
    return db["users_info"][user]["电子卡余额"]


# (tool, arguments, ok, text the answer holds, what the database holds afterwards or None)
CASES = [
    ("get_user_info", {"user_id": USER}, True, "宋敬明", None),
    ("get_user_info", {"user_id": "nobody"}, False, "没有查到用户nobody的信息", None),
    ("get_user_orders_info", MINE, True, f'"订单ID": ["{PAID}", "{TWO_ITEMS}"]', None),
    ("get_user_orders_info", {**ON, "user_id": "nobody"}, False, "没有找到用户nobody的订单信息", None),
    ("get_logistics_info", {**MINE, "order_id": PAID}, True, "物流单号", None),
    ("get_logistics_info", {**MINE, "order_id": "999"}, False,
     f"没有找到jd店铺{SHOP}用户{USER}订单999的物流信息", None),
    ("get_discount_info", ON, True, "政策名称", None),
    ("get_discount_info", {"platform": PLATFORM, "shop_id": "nope"}, False, "没有找到jd店铺nope的优惠信息", None),
    ("get_image_info", {"summarized_query": "晒单截图", "needed_query": "有无评论", "history_messages": "https://x/a.jpg"},
     True, OFFLINE_IMAGE_ANSWER, None),
    ("get_image_info", {"summarized_query": "q", "needed_query": "q", "history_messages": ""}, False,
     "参数history_messages有错误，请重新输入。", None),
    ("get_repair_info", {**ON, "product_id": HEATER}, True, "维修说明", None),
    ("get_repair_info", {**ON, "product_id": "1"}, False, "未找到商品 1 的维修信息", None),
    ("manage_return", {**MINE, "order_id": PAID}, True, "退货申请已进行处理",
     lambda db: order(db, PAID)["订单状态"] == "已退货"),
    ("manage_return", {**MINE, "order_id": "999"}, False, "没有找到订单999的信息", None),
    ("manage_exchange", {**MINE, "order_id": TWO_ITEMS, "original_product_id": NO_AUX, "action": "查询"}, True,
     f"订单{TWO_ITEMS}可以进行换货, 订单状态为已付款", None),
    ("manage_exchange", {**MINE, "order_id": TWO_ITEMS, "original_product_id": NO_AUX, "action": "换货",
                         "exchange_product_id": "100112573624"}, True, "换货成功",
     lambda db: order(db, TWO_ITEMS)["订单商品列表"][0]["商品ID"] == "100112573624"),
    ("manage_exchange", {**MINE, "order_id": TWO_ITEMS, "original_product_id": "1", "action": "查询"}, False,
     "没有找到商品1", None),
    ("manage_exchange", {**MINE, "order_id": "999", "original_product_id": NO_AUX, "action": "查询"}, False,
     f"没有找到jd店铺{SHOP}用户{USER}订单999", None),
    ("manage_exchange", {**MINE, "order_id": PAID, "original_product_id": NO_AUX, "action": "换货",
                         "exchange_product_id": "100112573624"}, False, f"订单{PAID}购买的商品中没有找到商品{NO_AUX}", None),
    ("manage_exchange", {**MINE, "order_id": PAID, "original_product_id": NO_AUX, "action": "退货"}, False,
     "action must be one of 查询, 换货", None),
    ("manage_urgent", {**MINE, "order_id": PAID}, True, "设置为加急", lambda db: order(db, PAID)["是否加急"] is True),
    ("manage_urgent", {**MINE, "order_id": "999"}, False, f"没有找到jd店铺{SHOP}用户{USER}订单999", None),
    ("get_auxiliary_materials_info", {**ON, "product_id": HEATER}, True, "辅材材料", None),
    ("get_auxiliary_materials_info", {**ON, "product_id": NO_AUX}, True, f"商品{NO_AUX}没有辅材材料", None),
    ("get_auxiliary_materials_info", {**ON, "product_id": "abc"}, False, "商品IDabc格式错误，应该为数字", None),
    ("get_gift_info", {**ON, "product_id": HEATER}, True, "赠品信息", None),
    ("get_gift_info", {**ON, "product_id": "1"}, False, f"没有找到jd店铺{SHOP}的商品1的信息", None),
    ("manage_ecard", {"platform": PLATFORM, "user_id": USER, "action": "信息查询"}, True, "京东E卡", None),
    ("manage_ecard", {"platform": PLATFORM, "user_id": USER, "action": "余额查询"}, True,
     f"用户{USER}的电子卡余额为5500元", None),
    ("manage_ecard", {**MINE, "action": "余额使用", "product_id": HEATER, "quantity": 2}, True, "已购买2件商品",
     lambda db: balance(db) == 5500 - 2 * 780.06),
    ("manage_ecard", {"platform": PLATFORM, "user_id": USER, "action": "退款", "amount": 301.35}, True, "已退款301.35元",
     lambda db: balance(db) == 5801.35),
    ("manage_ecard", {"platform": PLATFORM, "user_id": "nobody", "action": "余额查询"}, False,
     "没有找到用户nobody的信息", None),
    ("manage_ecard", {"platform": PLATFORM, "user_id": USER, "action": "余额使用", "product_id": HEATER}, False,
     "请提供商品ID、购买数量和店铺ID", None),
    ("manage_ecard", {**MINE, "action": "余额使用", "product_id": "1", "quantity": 1}, False, "没有找到商品1的信息", None),
    ("manage_ecard", {**MINE, "action": "余额使用", "product_id": HEATER, "quantity": "two"}, False,
     "quantity must be an integer", None),
    ("get_installation_service_info", {**ON, "product_id": HEATER}, True, "安装说明", None),
    ("get_installation_service_info", {**ON, "product_id": "x1"}, False, "商品IDx1格式错误，应该为数字", None),
    ("get_product_info", {**ON, "product_id": HEATER}, True, '"商品价格": 780.06', None),
    ("get_product_info", {**ON, "product_id": "1"}, False, f"没有找到jd店铺{SHOP}的商品1的信息", None),
    ("manage_order", {**MINE, "action": "查询", "order_id": PAID}, True, '"支付方式": "微信"', None),
    ("manage_order", {**MINE, "action": "取消", "order_id": PAID}, True, f"订单{PAID}已取消",
     lambda db: order(db, PAID)["订单状态"] == "已取消"),
    ("manage_order", {**MINE, "action": "修改", "order_id": PAID, "address": "新街1号"}, True, "已修改",
     lambda db: order(db, PAID)["收货地址"]["详细地址"] == "新街1号"),
    ("manage_order", {**MINE, "action": "增加", "payment": "京东E卡",
                      "product_info_list": [{"product_id": HEATER, "quantity": 1}]}, True, "订单1234567890已增加",
     lambda db: order(db, "1234567890")["订单总金额"] == 780.06 and order(db, "1234567890")["支付方式"] == "京东E卡"),
    ("manage_order", {**MINE, "action": "取消", "order_id": "999"}, False, "没有找到订单999的信息", None),
    ("manage_order", {**MINE, "action": "修改", "order_id": PAID}, False, "新地址和新手机号都为空，无法修改", None),
    ("manage_order", {**MINE, "action": "增加", "product_info_list": []}, False, "商品列表为空，无法进行下单", None),
    ("manage_order", {**MINE, "action": "增加"}, False, "product_info_list is required for 增加", None),
    ("manage_order", {**MINE, "action": "增加", "payment": "现金", "product_info_list": []}, False,
     "payment must be one of 银行卡, 京东E卡, 微信, 支付宝", None),
    ("schedule_service", {**MINE, "order_id": PAID, "user_name": "宋敬明", "phone_number": "15540534614",
                          "service_type": "安装", "service_time": "周日"}, True, "预约安装服务成功",
     lambda db: db["service"][PLATFORM][SHOP][USER][PAID]["预约日期"] == "周日"),
    ("schedule_service", {**MINE, "order_id": "999", "user_name": "宋敬明", "phone_number": "1",
                          "service_type": "安装", "service_time": "周日"}, False, f"没有找到jd店铺{SHOP}用户{USER}订单999", None),
    ("schedule_service", {**MINE, "order_id": PAID, "user_name": "宋敬明", "phone_number": "1",
                          "service_type": "安装", "service_time": "明天"}, False, "service_time must be one of 周一", None),
    ("get_fault_code_info", {**ON, "product_id": "100107985736", "fault_code": "E01"}, True, "点火失败", None),
    ("get_fault_code_info", {**ON, "product_id": "100107985736", "fault_code": "E99"}, False,
     f"没有找到jd店铺{SHOP}商品100107985736的故障代码E99的信息", None),
    ("get_fault_code_info", {**ON, "product_id": "1", "fault_code": "E01"}, False, f"没有找到jd店铺{SHOP}商品1的信息", None),
    ("register_cashback_by_review", {**OTHER, "action": "查询"}, True, "的晒单返现记录（未晒单）", None),
    ("register_cashback_by_review", {**OTHER, "action": "返现"}, True, "进入返现流程（返现成功）",
     lambda db: db["register_cashback"][PLATFORM][SHOP]["cnjdii星星ii"]["316123105676"] is True),
    ("register_cashback_by_review", {**OTHER, "action": "登记"}, False, "action must be one of 查询, 返现", None),
    ("compare_products_info", {**ON, "product_ids": [HEATER, NO_AUX]}, True, f'"商品ID": "{NO_AUX}"', None),
    ("compare_products_info", {**ON, "product_ids": [HEATER, "1"]}, False, f"没有找到jd店铺{SHOP}商品1的信息", None),
    ("compare_products_info", {**ON, "product_ids": HEATER}, False, "product_ids must be a list of strings", None),
    ("manage_invoice", {"title": "宋敬明", "order_id": PAID, "phone_number": "15540534614", "invoice_type": "个人发票"},
     True, "已成功开具发票", lambda db: db["invoices"][PAID]["发票抬头"] == "宋敬明"),
    ("manage_invoice", {"title": "宋敬明", "order_id": PAID, "phone_number": "1", "invoice_type": "收据"}, False,
     "invoice_type must be one of 个人发票, 企业发票, 增值税专用发票", None),
    ("transfer_to_specialist", MINE, True, f"已为jd店铺{SHOP}用户{USER}转接到客服", None),
    ("transfer_to_specialist", ON, False, "invalid arguments for transfer_to_specialist_tool: user_id is required", None),
]


def test_the_table_covers_every_tool_both_ways():
    assert len(tools.TOOLS) == 21
    assert {name for name, _, ok, _, _ in CASES if ok} == set(tools.TOOLS)
    assert {name for name, _, ok, _, _ in CASES if not ok} == set(tools.TOOLS)


@pytest.mark.parametrize("name, arguments, ok, says, after", CASES,
                         ids=[f"{c[0]}-{'ok' if c[2] else 'error'}-{n}" for n, c in enumerate(CASES)])
def test_a_tool_call(database, name, arguments, ok, says, after):
    before = json.dumps(database, sort_keys=True)
    result = tool_run(database, name + tools.MCP_SUFFIX, arguments)
    assert result.ok is ok and says in result.content
    assert result.content.startswith("Error: ") is not ok
    if after is not None:
        assert after(database)
    elif not tools.TOOLS[name].writes or not ok:
        assert json.dumps(database, sort_keys=True) == before  # look-ups and refusals change nothing


def test_bare_and_agent_names_are_the_same_tool(database):
    arguments = {**MINE, "order_id": PAID}
    assert tool_run(database, "manage_urgent", arguments) == tool_run(database, "manage_urgent_tool", arguments)


@pytest.mark.parametrize("name, arguments, says", [
    ("launch_rocket", {}, "Error: unknown tool 'launch_rocket'"),
    ("get_user_info_tool", "cnjd喜哥2号", "arguments must be a JSON object"),
    ("get_user_info_tool", {"user_id": 42}, "user_id must be a string"),
])
def test_a_malformed_call_is_an_error_the_agent_reads(database, name, arguments, says):
    result = tool_run(database, name, arguments)
    assert not result.ok and says in result.content


def test_arguments_are_converted_as_the_benchmarks_schema_does(database):
    result = tool_run(database, "manage_ecard_tool", {**MINE, "action": "余额使用", "product_id": HEATER, "quantity": "1"})
    assert result.ok and balance(database) == 5500 - 780.06


def test_a_cashback_for_a_customer_without_records_replaces_the_table_as_the_benchmark_does(database):
    assert tool_run(database, "register_cashback_by_review", {**MINE, "order_id": PAID, "action": "返现"}).ok
    assert database["register_cashback"] == {PLATFORM: {SHOP: {USER: {PAID: True}}}}
    answer = tool_run(database, "register_cashback_by_review", {**MINE, "order_id": PAID, "action": "查询"})
    assert "（已晒单）" in answer.content


def test_the_image_tool_asks_the_describer_when_one_is_set(database):
    asked = []
    image_describer_set(lambda **question: asked.append(question) or "截图含有用户评论")
    try:
        result = tool_run(database, "get_image_info_tool", {"summarized_query": "验证晒单", "needed_query": "评论",
                                                            "history_messages": "图片 https://x/a.jpg"})
    finally:
        image_describer_set(None)
    assert result.ok and result.content == "截图含有用户评论"
    assert asked == [{"summarized_query": "验证晒单", "needed_query": "评论", "history_messages": "图片 https://x/a.jpg"}]


def test_the_schemas_offer_every_tool_under_its_agent_name():
    schemas = {s["function"]["name"]: s["function"] for s in tools.tool_schemas()}
    assert set(schemas) == {name + "_tool" for name in tools.TOOLS}
    order_tool = schemas["manage_order_tool"]["parameters"]
    assert order_tool["required"] == ["platform", "shop_id", "user_id", "action"]
    assert order_tool["properties"]["action"]["enum"] == ["查询", "取消", "修改", "增加"]
    assert order_tool["properties"]["product_info_list"]["items"]["required"] == ["product_id", "quantity"]
    for schema in schemas.values():
        json.dumps(schema)  # plain JSON
        assert set(schema["parameters"]["required"]) <= set(schema["parameters"]["properties"])
