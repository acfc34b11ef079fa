"""ECom-Bench's 21 customer-service tools, written for memweb from the benchmark's tool names,
argument schemas, documented behaviour and data model (agent/servers/offline/ in its repository).

The state is ECom-Bench's own database: one dict whose keys are its data files' names without
`.json` (`orders`, `products`, `users_info`, ...), each holding that file's content. Write tools
change it in place, exactly as the benchmark's functions change theirs, so that a final database
can be compared with the one the benchmark's own code produces from the same calls.

Each tool answers to two names: the one the agent is offered (`manage_order_tool`, the benchmark's
MCP name, which its gold look-ups use) and the bare one (`manage_order`, the name its gold actions
use). Arguments are checked against the tool's schema first (as the benchmark's MCP server does);
then the bare function's semantics apply (the defaults of the benchmark's action replay).

Every error an agent can cause comes back as ToolResult(ok=False, "Error: <text>"), with the
benchmark's own text where it has one; nothing is raised. Texts that are memweb's own (argument
checks, an unknown tool) are in English.
"""
import json
from collections.abc import Callable
from dataclasses import dataclass, field

from evaluation.environments.protocol import ToolResult

MCP_SUFFIX = "_tool"
OFFLINE_IMAGE_ANSWER = "image description unavailable offline"
WEEKDAYS = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")
DEFAULT_PAYMENT = "支付宝"  # what the benchmark's manage_order assumes when no payment is named


class Refused(Exception):
    """A tool's refusal: the text the agent reads after "Error: "."""


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # string | integer | number | strings | products
    description: str
    required: bool = True
    choices: tuple[str, ...] = ()
    default: object = None


@dataclass(frozen=True)
class Tool:
    name: str  # the bare name (the benchmark's gold actions use it)
    description: str
    params: tuple[Param, ...]
    run: Callable = field(repr=False)
    writes: bool = False

    @property
    def agent_name(self) -> str:
        return self.name + MCP_SUFFIX


# --- the database, read the way the benchmark reads it ----------------------------------------

def _product(state: dict, platform: str, shop_id: str, product_id: str) -> dict | None:
    return state.get("products", {}).get(platform, {}).get(shop_id, {}).get(product_id) or None


def _order(state: dict, platform: str, shop_id: str, user_id: str, order_id: str) -> dict | None:
    return state.get("orders", {}).get(platform, {}).get(shop_id, {}).get(user_id, {}).get(order_id) or None


def _user(state: dict, user_id: str) -> dict | None:
    return state.get("users_info", {}).get(user_id) or None


def _product_base(product: dict) -> dict:
    return {"商品ID": product["商品ID"], "商品名称": product["商品名称"]}


def _product_summary(product: dict) -> dict:
    return {key: product[key] for key in ("商品ID", "商品名称", "商品状态", "商品价格", "商品描述")}


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def _numeric_product(state: dict, platform: str, shop_id: str, product_id: str) -> dict:
    """The product, for the tools that first check that its id is all digits."""
    if not product_id.isdigit():
        raise Refused(f"商品ID{product_id}格式错误，应该为数字")
    product = _product(state, platform, shop_id, product_id)
    if product is None:
        raise Refused(f"没有找到{platform}店铺{shop_id}的商品{product_id}的信息")
    return product


def _product_section(state: dict, platform: str, shop_id: str, product_id: str, section: str) -> str:
    product = _numeric_product(state, platform, shop_id, product_id)
    if section not in product:
        raise Refused(f"商品{product_id}没有{section}")
    return _dumps({**_product_base(product), section: product[section]})


# --- look-ups -------------------------------------------------------------------------------

def get_user_info(state: dict, *, user_id: str) -> str:
    user = _user(state, user_id)
    if user is None:
        raise Refused(f"没有查到用户{user_id}的信息")
    return _dumps(user)


def get_user_orders_info(state: dict, *, platform: str, shop_id: str, user_id: str) -> str:
    orders = state.get("orders", {}).get(platform, {}).get(shop_id, {}).get(user_id)
    if not orders:
        raise Refused(f"没有找到用户{user_id}的订单信息")
    return _dumps({"订单ID": list(orders)})


def get_logistics_info(state: dict, *, platform: str, shop_id: str, order_id: str, user_id: str) -> str:
    logistics = state.get("logistics", {}).get(platform, {}).get(shop_id, {}).get(user_id, {}).get(order_id)
    if not logistics:
        raise Refused(f"没有找到{platform}店铺{shop_id}用户{user_id}订单{order_id}的物流信息")
    return _dumps(logistics)


def get_discount_info(state: dict, *, platform: str, shop_id: str) -> str:
    discount = state.get("discount", {}).get(platform, {}).get(shop_id)
    if not discount:
        raise Refused(f"没有找到{platform}店铺{shop_id}的优惠信息")
    return _dumps(discount)


# Set by the Django side to route image questions to a multimodal LLM role; None offline.
_image_describer: Callable[..., str] | None = None


def image_describer_set(describer: Callable[..., str] | None) -> None:
    """Who answers `get_image_info`: a callable taking summarized_query, needed_query and
    history_messages (keywords) and returning the description; None answers that none is available."""
    global _image_describer
    _image_describer = describer


def get_image_info(state: dict, *, summarized_query: str, needed_query: str, history_messages: str) -> str:
    if not history_messages:
        raise Refused("参数history_messages有错误，请重新输入。")
    if _image_describer is None:
        return OFFLINE_IMAGE_ANSWER
    return _image_describer(summarized_query=summarized_query, needed_query=needed_query,
                            history_messages=history_messages)


def get_repair_info(state: dict, *, platform: str, shop_id: str, product_id: str) -> str:
    product = _product(state, platform, shop_id, product_id)
    if product is None:
        raise Refused(f"未找到商品 {product_id} 的维修信息")
    return _dumps({**_product_base(product), "维修说明": product.get("维修说明", "")})


def get_auxiliary_materials_info(state: dict, *, platform: str, shop_id: str, product_id: str) -> str:
    product = _numeric_product(state, platform, shop_id, product_id)
    if not product.get("辅材材料"):
        return f"商品{product_id}没有辅材材料"  # an answer, not an error: the product needs none
    return _dumps({**_product_base(product), "辅材材料": product["辅材材料"]})


def get_gift_info(state: dict, *, platform: str, shop_id: str, product_id: str) -> str:
    return _product_section(state, platform, shop_id, product_id, "赠品信息")


def get_installation_service_info(state: dict, *, platform: str, shop_id: str, product_id: str) -> str:
    return _product_section(state, platform, shop_id, product_id, "安装说明")


def get_product_info(state: dict, *, platform: str, shop_id: str, product_id: str) -> str:
    return _dumps(_product_summary(_numeric_product(state, platform, shop_id, product_id)))


def get_fault_code_info(state: dict, *, platform: str, shop_id: str, product_id: str, fault_code: str) -> str:
    if not product_id.isdigit():
        raise Refused(f"商品ID{product_id}格式错误，应该为数字")
    product = _product(state, platform, shop_id, product_id)
    if product is None:
        raise Refused(f"没有找到{platform}店铺{shop_id}商品{product_id}的信息")
    fault = next((f for f in product.get("常见故障", []) if f.get("故障代码") == fault_code), None)
    if fault is None:
        raise Refused(f"没有找到{platform}店铺{shop_id}商品{product_id}的故障代码{fault_code}的信息")
    return _dumps({**_product_base(product), "故障信息": fault})


def compare_products_info(state: dict, *, shop_id: str, platform: str, product_ids: list[str]) -> str:
    products = []
    for product_id in product_ids:
        product = _product(state, platform, shop_id, product_id)
        if product is None:
            raise Refused(f"没有找到{platform}店铺{shop_id}商品{product_id}的信息")
        products.append(_product_summary(product))
    return _dumps(products)


def transfer_to_specialist(state: dict, *, platform: str, shop_id: str, user_id: str) -> str:
    return f"已为{platform}店铺{shop_id}用户{user_id}转接到客服，请耐心等待"


# --- changes --------------------------------------------------------------------------------

def _order_required(state: dict, platform: str, shop_id: str, user_id: str, order_id: str) -> dict:
    order = _order(state, platform, shop_id, user_id, order_id)
    if order is None:
        raise Refused(f"没有找到{platform}店铺{shop_id}用户{user_id}订单{order_id}")
    return order


def manage_urgent(state: dict, *, platform: str, shop_id: str, order_id: str, user_id: str) -> str:
    _order_required(state, platform, shop_id, user_id, order_id)["是否加急"] = True
    return f"已将{platform}店铺{shop_id}用户{user_id}订单{order_id}设置为加急"


def manage_return(state: dict, *, platform: str, shop_id: str, order_id: str, user_id: str) -> str:
    # Like the benchmark, the tool itself does not check the order's status: its policy asks the agent to.
    order = _order(state, platform, shop_id, user_id, order_id)
    if order is None:
        raise Refused(f"没有找到订单{order_id}的信息")
    order["订单状态"] = "已退货"
    return f"退货申请已进行处理, 退货的订单是{_dumps(order)}"


_EXCHANGEABLE = ("待付款", "已付款", "处理中")


def manage_exchange(state: dict, *, platform: str, shop_id: str, order_id: str, user_id: str,
                    original_product_id: str, action: str, exchange_product_id: str | None = None) -> str:
    original = _product(state, platform, shop_id, original_product_id)
    if original is None:
        raise Refused(f"没有找到商品{original_product_id}")
    order = _order_required(state, platform, shop_id, user_id, order_id)
    if action == "查询":
        status = order.get("订单状态", "")
        verdict = "可以进行换货, " if status in _EXCHANGEABLE else "无法进行换货，"
        return _dumps({"订单状态": f"订单{order_id}{verdict}订单状态为{status}", "可换货商品": original.get("可换货商品", [])})
    item = next((i for i in order.get("订单商品列表", []) if i.get("商品ID", "") == original_product_id), None)
    if item is None:
        raise Refused(f"订单{order_id}购买的商品中没有找到商品{original_product_id}")
    item["商品ID"] = exchange_product_id
    return f"订单{order_id}商品{original_product_id}换货成功，换货后的商品ID为{exchange_product_id}。"


# The facts of the benchmark's e-card notice, in memweb's own words.
ECARD_SERVICE = ("京东E卡：京东发行的电子预付卡（电子卡或实体卡），绑定京东账户后用于购买京东自营商品；自激活起36个月内有效，"
                 "余额在有效期内保留；不能用于第三方卖家商品、虚拟充值和部分特殊品类；退款退回原卡，不能提现。")


def manage_ecard(state: dict, *, platform: str, user_id: str, action: str, shop_id: str | None = None,
                 product_id: str | None = None, quantity: int | None = None, amount: float = 0) -> str:
    user = _user(state, user_id)
    if user is None:
        raise Refused(f"没有找到用户{user_id}的信息")
    if action == "信息查询":
        return ECARD_SERVICE
    if action == "余额查询":
        return f"用户{user_id}的电子卡余额为{user['电子卡余额']}元"
    if action == "余额使用":
        if not product_id or not quantity or not shop_id:
            raise Refused("请提供商品ID、购买数量和店铺ID")
        product = _product(state, platform, shop_id, product_id)
        if product is None:
            raise Refused(f"没有找到商品{product_id}的信息")
        user["电子卡余额"] -= product.get("商品价格", 0) * quantity
        return f"已购买{quantity}件商品{product_id}，用户{user_id}的电子卡余额为{user['电子卡余额']}元"
    user["电子卡余额"] += float(amount)  # 退款: the benchmark stores the balance as a float from here on
    return f"已退款{amount}元，用户{user_id}的电子卡余额为{user['电子卡余额']}元"


def register_cashback_by_review(state: dict, *, platform: str, shop_id: str, user_id: str, order_id: str,
                                action: str) -> str:
    if not state.get("register_cashback"):
        state["register_cashback"] = {}
    where = f"{platform}店铺{shop_id}用户{user_id}订单{order_id}"
    if action == "查询":
        record = state["register_cashback"].get(platform, {}).get(shop_id, {}).get(user_id, {}).get(order_id)
        if not record:
            return f"没有找到{where}的晒单返现记录（未晒单）"  # an answer: no review registered yet
        return f"确认查询到{where}的晒单返现记录（已晒单）"
    records = state["register_cashback"].get(platform, {}).get(shop_id, {}).get(user_id)
    if isinstance(records, dict):
        records[order_id] = True
    else:
        # The benchmark replaces the whole table when the user has no record yet (its nested dict
        # lookup fails and it starts a fresh one); done the same so final databases compare equal.
        state["register_cashback"] = {platform: {shop_id: {user_id: {order_id: True}}}}
    return f"{where}的晒单返现已经进入返现流程（返现成功）"


def schedule_service(state: dict, *, platform: str, shop_id: str, order_id: str, user_id: str, user_name: str,
                     phone_number: str, service_type: str, service_time: str) -> str:
    _order_required(state, platform, shop_id, user_id, order_id)
    services = state.setdefault("service", {}).setdefault(platform, {}).setdefault(shop_id, {})
    services.setdefault(user_id, {})[order_id] = {
        "服务类型": service_type, "店铺ID": shop_id, "用户ID": user_id, "订单ID": order_id, "平台": platform,
        "电话号码": phone_number, "用户姓名": user_name, "预约日期": service_time}
    return f"预约{service_type}服务成功"


def manage_invoice(state: dict, *, title: str, order_id: str, phone_number: str, invoice_type: str) -> str:
    # The benchmark issues an invoice for any order id: it checks nothing.
    invoice = {"发票抬头": title, "发票类型": invoice_type, "订单ID": order_id, "手机号码": phone_number}
    if not state.get("invoices"):
        state["invoices"] = {}
    state["invoices"][order_id] = invoice
    return f"已成功开具发票{_dumps(invoice)}"


NEW_ORDER_ID = "1234567890"  # the benchmark gives every order placed through the tool this id


def manage_order(state: dict, *, platform: str, shop_id: str, user_id: str, action: str,
                 payment: str = DEFAULT_PAYMENT, order_id: str | None = None, address: str | None = None,
                 phone_number: str | None = None, product_info_list: list[dict] | None = None) -> str:
    if action == "增加":
        return _order_place(state, platform, shop_id, user_id, payment, product_info_list)
    order = _order(state, platform, shop_id, user_id, order_id) if order_id else None
    if order is None:
        raise Refused(f"没有找到订单{order_id}的信息")
    if action == "查询":
        return _dumps(order)
    if action == "取消":
        # As in the benchmark, the status is not checked here: its policy asks the agent to.
        order["订单状态"] = "已取消"
        return f"订单{order_id}已取消，取消的订单是{_dumps(order)}"
    if not address and not phone_number:
        raise Refused("新地址和新手机号都为空，无法修改")
    if address:  # only the street line changes, as in the benchmark
        order["收货地址"]["详细地址"] = address
    if phone_number:
        order["收货地址"]["电话号码"] = phone_number
    return f"订单{order_id}的地址和手机号已修改，修改后的订单是{_dumps(order)}"


def _order_place(state: dict, platform: str, shop_id: str, user_id: str, payment: str,
                 product_info_list: list[dict] | None) -> str:
    if product_info_list is None:
        raise Refused("invalid arguments for manage_order: product_info_list is required for 增加")
    if not product_info_list:
        raise Refused("商品列表为空，无法进行下单")
    user = _user(state, user_id)
    if user is None:
        raise Refused(f"没有找到用户{user_id}的信息")
    address = user["地址信息"]
    recipient = {"收件人姓名": user["用户姓名"], "电话号码": user["电话号码"],
                 **{key: address[key] for key in ("国家", "省份", "城市", "区县", "详细地址")}}
    items, total = [], 0
    for wanted in product_info_list:
        product = _product(state, platform, shop_id, wanted["product_id"])
        if product is None:
            continue  # the benchmark leaves unknown products out of the order silently
        items.append({"商品ID": wanted["product_id"], "商品价格": product["商品价格"], "数量": wanted["quantity"]})
        total += product["商品价格"] * wanted["quantity"]
    order = {"用户ID": user_id, "订单ID": NEW_ORDER_ID, "订单状态": "已付款", "订单总金额": total, "是否加急": False,
             "订单商品列表": items, "收货地址": recipient, "支付方式": payment}
    orders = state.setdefault("orders", {}).setdefault(platform, {}).setdefault(shop_id, {})
    orders.setdefault(user_id, {})[NEW_ORDER_ID] = order
    return f"订单{NEW_ORDER_ID}已增加,具体订单内容：{_dumps(order)}"


# --- the table ------------------------------------------------------------------------------

def _p(name: str, description: str, kind: str = "string", **options) -> Param:
    return Param(name, kind, description, **options)


PLATFORM = _p("platform", "The e-commerce platform (e.g. jd).")
SHOP = _p("shop_id", "The shop's id.")
USER = _p("user_id", "The customer's user id.")
ORDER = _p("order_id", "The order's id.")
PRODUCT = _p("product_id", "The product's id (digits).")

TOOLS: dict[str, Tool] = {tool.name: tool for tool in (
    Tool("get_user_info", "The customer's stored profile: name, phone, address, e-card balance.", (USER,),
         get_user_info),
    Tool("get_user_orders_info", "The ids of all of the customer's orders in this shop.", (PLATFORM, SHOP, USER),
         get_user_orders_info),
    Tool("get_logistics_info", "Shipping details of an order: carrier, tracking number, expected delivery.",
         (PLATFORM, SHOP, ORDER, USER), get_logistics_info),
    Tool("get_discount_info", "The shop's current discount and promotion policy.", (PLATFORM, SHOP),
         get_discount_info),
    Tool("get_image_info", "Describe an image the customer sent (a link in the conversation) and answer a question "
         "about it. Call it only when the conversation holds an image link.",
         (_p("summarized_query", "What the customer wants to know about the image, summarised."),
          _p("needed_query", "What information should be read from the image."),
          _p("history_messages", "The conversation so far, including the image's full link.")), get_image_info),
    Tool("get_repair_info", "A product's repair service information.", (PLATFORM, SHOP, PRODUCT), get_repair_info),
    Tool("manage_return", "Submit a return request for an order.", (PLATFORM, SHOP, ORDER, USER), manage_return,
         writes=True),
    Tool("manage_exchange", "Exchange a product of an order: '查询' tells whether the order can be exchanged and "
         "which products it can be exchanged for; '换货' makes the exchange.",
         (PLATFORM, SHOP, ORDER, USER, _p("original_product_id", "The id of the product in the order."),
          _p("action", "查询 (check) or 换货 (exchange).", choices=("查询", "换货")),
          _p("exchange_product_id", "The id of the product to exchange to (for 换货).", required=False)),
         manage_exchange, writes=True),
    Tool("manage_urgent", "Ask for an order's shipping or delivery to be expedited.", (PLATFORM, SHOP, ORDER, USER),
         manage_urgent, writes=True),
    Tool("get_auxiliary_materials_info", "The auxiliary materials (fittings, parts) a product needs.",
         (PLATFORM, SHOP, PRODUCT), get_auxiliary_materials_info),
    Tool("get_gift_info", "The gifts that come with a product.", (PLATFORM, SHOP, PRODUCT), get_gift_info),
    Tool("manage_ecard", "The customer's JD e-card: '信息查询' (what the card is), '余额查询' (balance), '余额使用' (pay "
         "for a product with it: needs shop_id, product_id, quantity), '退款' (refund an amount to it).",
         (PLATFORM, USER,
          _p("action", "信息查询, 余额使用, 余额查询 or 退款.", choices=("信息查询", "余额使用", "余额查询", "退款")),
          _p("shop_id", "The shop's id (for 余额使用).", required=False),
          _p("product_id", "The product's id (for 余额使用).", required=False),
          _p("quantity", "How many (for 余额使用).", "integer", required=False),
          _p("amount", "The amount to refund (for 退款).", "number", required=False, default=0)),
         manage_ecard, writes=True),
    Tool("get_installation_service_info", "A product's installation service and instructions.",
         (PLATFORM, SHOP, PRODUCT), get_installation_service_info),
    Tool("get_product_info", "A product's details: name, status, price, description.", (PLATFORM, SHOP, PRODUCT),
         get_product_info),
    Tool("manage_order", "Orders: '查询' (details of an order), '取消' (cancel it; confirm with the customer first), "
         "'修改' (change its address or phone number), '增加' (place a new order from product_info_list).",
         (PLATFORM, SHOP, USER, _p("action", "查询, 取消, 修改 or 增加.", choices=("查询", "取消", "修改", "增加")),
          _p("payment", "How the new order is paid (for 增加).", required=False,
             choices=("银行卡", "京东E卡", "微信", "支付宝"), default=DEFAULT_PAYMENT),
          _p("order_id", "The order's id (for 查询, 取消, 修改).", required=False),
          _p("address", "The new street address (for 修改).", required=False),
          _p("phone_number", "The new phone number (for 修改).", required=False),
          _p("product_info_list", "The products to order (for 增加).", "products", required=False)),
         manage_order, writes=True),
    Tool("schedule_service", "Book a repair, inspection or installation visit for an order.",
         (PLATFORM, SHOP, ORDER, USER, _p("user_name", "The customer's name."),
          _p("phone_number", "The customer's phone number."),
          _p("service_type", "维修 (repair), 检查 (inspection) or 安装 (installation).", choices=("维修", "检查", "安装")),
          _p("service_time", "The day of the visit.", choices=WEEKDAYS)),
         schedule_service, writes=True),
    Tool("get_fault_code_info", "What a product's fault code means.",
         (PLATFORM, SHOP, PRODUCT, _p("fault_code", "The fault code shown by the product (e.g. E04).")),
         get_fault_code_info),
    Tool("register_cashback_by_review", "Cashback for a posted review: '查询' tells whether the order's review is "
         "registered; '返现' registers it and starts the cashback.",
         (PLATFORM, SHOP, USER, ORDER, _p("action", "查询 (check) or 返现 (cashback).", choices=("查询", "返现"))),
         register_cashback_by_review, writes=True),
    Tool("compare_products_info", "Compare several products of the shop: names, status, prices, descriptions.",
         (SHOP, PLATFORM, _p("product_ids", "The ids of the products to compare.", "strings")),
         compare_products_info),
    Tool("manage_invoice", "Issue an invoice for an order.",
         (_p("title", "The invoice title: a company's or a person's name."), ORDER,
          _p("phone_number", "A contact phone number."),
          _p("invoice_type", "个人发票 (personal), 企业发票 (company) or 增值税专用发票 (VAT special invoice).",
             choices=("个人发票", "企业发票", "增值税专用发票"))),
         manage_invoice, writes=True),
    Tool("transfer_to_specialist", "Transfer the customer to a specialist human agent.", (PLATFORM, SHOP, USER),
         transfer_to_specialist),
)}
AGENT_NAMES = {tool.agent_name: tool for tool in TOOLS.values()}
TRANSFER_TOOL = TOOLS["transfer_to_specialist"].agent_name


QUERY_ACTIONS = ("查询", "信息查询", "余额查询")  # the actions of a write tool that only read


def tool_named(name: str) -> Tool | None:
    """The tool a call names, by its agent name (`manage_order_tool`) or its bare name (`manage_order`)."""
    return AGENT_NAMES.get(name) or TOOLS.get(name)


def call_changes(call: dict) -> bool:
    """Whether a call ({name, arguments}) asks for a change, not a look-up."""
    tool, arguments = tool_named(call["name"]), call.get("arguments")
    action = arguments.get("action") if isinstance(arguments, dict) else None
    return bool(tool and tool.writes and action not in QUERY_ACTIONS)


# --- argument checks (what the benchmark's MCP schema enforces) ------------------------------

def _integer(value):
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return int(value.strip())
    raise ValueError


def _number(value):
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return float(value.strip())
    raise ValueError


def _string(value):
    if not isinstance(value, str):
        raise ValueError
    return value


def _strings(value):
    if not isinstance(value, list):
        raise ValueError
    return [_string(item) for item in value]


def _products(value):
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise ValueError
    return [{"product_id": _string(item.get("product_id")), "quantity": _integer(item.get("quantity"))}
            for item in value]


_COERCE = {"string": _string, "integer": _integer, "number": _number, "strings": _strings, "products": _products}
_KIND_WORDS = {"string": "a string", "integer": "an integer", "number": "a number", "strings": "a list of strings",
               "products": "a list of {product_id, quantity}"}


def arguments_checked(tool: Tool, arguments) -> dict:
    """The call's arguments as the tool takes them: types converted as a lenient JSON-schema check
    would, defaults filled in, unknown names dropped (the benchmark's server ignores them). Refused
    with a sentence naming the argument otherwise."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise Refused(f"invalid arguments for {tool.agent_name}: arguments must be a JSON object")
    checked = {}
    for param in tool.params:
        value = arguments.get(param.name)
        if value is None:
            if param.required:
                raise Refused(f"invalid arguments for {tool.agent_name}: {param.name} is required")
            if param.default is not None:
                checked[param.name] = param.default
            continue
        try:
            value = _COERCE[param.kind](value)
        except (TypeError, ValueError):
            raise Refused(f"invalid arguments for {tool.agent_name}: {param.name} must be "
                          f"{_KIND_WORDS[param.kind]}") from None
        if param.choices and value not in param.choices:
            raise Refused(f"invalid arguments for {tool.agent_name}: {param.name} must be one of "
                          f"{', '.join(param.choices)}")
        checked[param.name] = value
    return checked


def tool_run(state: dict, name: str, arguments) -> ToolResult:
    """One call on `state` (changed in place by a write tool); a refusal is the tool's answer."""
    tool = tool_named(name)
    if tool is None:
        return ToolResult(ok=False, content=f"Error: unknown tool {name!r}", data=None)
    try:
        text = tool.run(state, **arguments_checked(tool, arguments))
    except Refused as refusal:
        return ToolResult(ok=False, content=f"Error: {refusal}", data=None)
    return ToolResult(ok=True, content=text, data=_data(text))


def _data(text: str) -> dict:
    """The result as data: the JSON object or list a look-up returns, else the message."""
    try:
        value = json.loads(text)
    except ValueError:
        return {"message": text}
    return value if isinstance(value, dict) else {"items": value} if isinstance(value, list) else {"message": text}


def _schema_property(param: Param) -> dict:
    kinds = {"string": {"type": "string"}, "integer": {"type": "integer"}, "number": {"type": "number"},
             "strings": {"type": "array", "items": {"type": "string"}},
             "products": {"type": "array", "items": {
                 "type": "object", "properties": {"product_id": {"type": "string"}, "quantity": {"type": "integer"}},
                 "required": ["product_id", "quantity"]}}}
    prop = {**kinds[param.kind], "description": param.description}
    if param.choices:
        prop["enum"] = list(param.choices)
    return prop


def tool_schemas() -> list[dict]:
    """The tools under the names the agent calls them by, as OpenAI function schemas."""
    return [{"type": "function", "function": {
        "name": tool.agent_name, "description": tool.description,
        "parameters": {"type": "object", "properties": {p.name: _schema_property(p) for p in tool.params},
                       "required": [p.name for p in tool.params if p.required]}}}
        for tool in TOOLS.values()]
