"""Fixed vocabularies the shop generator draws from (names, products, fault codes, policies).

Kept apart from the generator so the generator reads as the rules that combine them.
"""

FIRST_NAMES = (
    "Maya", "Liam", "Sofia", "Noah", "Amara", "Ethan", "Lena", "Omar", "Grace", "Mateo", "Hana", "Lucas",
    "Zoe", "Daniel", "Priya", "Jonas", "Elena", "Samuel", "Aisha", "Felix", "Nora", "Ravi", "Clara", "Theo",
    "Iris", "Marco", "Leah", "Kenji", "Ruth", "Victor",
)
LAST_NAMES = (
    "Patel", "Okafor", "Lindqvist", "Moreau", "Castillo", "Nakamura", "Brennan", "Haddad", "Kowalski",
    "Fischer", "Reyes", "Adeyemi", "Novak", "Schmidt", "Rossi", "Tanaka", "Walsh", "Petrov", "Mensah", "Silva",
)
STREETS = (
    "Elm Street", "Harbor Road", "Maple Avenue", "Cedar Lane", "Mill Road", "Park Terrace", "Oak Drive",
    "Station Road", "Willow Way", "Bridge Street", "Orchard Close", "Hill View",
)
CITIES = (
    ("Springfield", "40"), ("Riverton", "52"), ("Lakewood", "61"), ("Fairview", "73"), ("Brookfield", "84"),
    ("Ashford", "27"), ("Clearwater", "33"), ("Greenville", "19"),
)
CARRIERS = ("SwiftShip", "ParcelPoint", "NorthExpress")
HUBS = ("Central Hub", "Regional Depot East", "Regional Depot West", "Local Delivery Station")
PAYMENT_METHODS = ("credit_card", "paypal", "gift_card")

# Appliances: (category, base price, warranty months, installation fee or None, fault codes)
APPLIANCE_CATEGORIES = (
    ("Refrigerator", 899.0, 24, 79.0, {
        "E11": "temperature sensor failure", "E24": "defrost heater fault", "E31": "fan motor blocked"}),
    ("Washing Machine", 649.0, 24, 59.0, {
        "E21": "drain pump blocked", "E18": "door lock fault", "E35": "water level sensor error"}),
    ("Dishwasher", 549.0, 24, 59.0, {
        "E15": "water leak detected", "E22": "filter clogged", "E09": "heating element fault"}),
    ("Tumble Dryer", 499.0, 12, 49.0, {
        "E41": "exhaust duct blocked", "E44": "drum motor overload", "E47": "moisture sensor dirty"}),
    ("Built-in Oven", 729.0, 24, 99.0, {
        "F12": "door lock motor fault", "F25": "oven sensor open circuit", "F33": "cooling fan failure"}),
    ("Air Conditioner", 1099.0, 36, 149.0, {
        "E05": "outdoor unit communication error", "E61": "refrigerant pressure low", "E72": "indoor coil frozen"}),
    ("Microwave", 189.0, 12, None, {
        "F01": "magnetron overheating", "F03": "door switch fault"}),
    ("Coffee Machine", 349.0, 12, None, {
        "E02": "descaling required", "E07": "grinder jammed"}),
    ("Robot Vacuum", 429.0, 12, None, {
        "E13": "wheel obstruction", "E16": "dust bin sensor fault"}),
)
APPLIANCE_BRANDS = (("Nordhaus", "NH"), ("Kelvix", "KX"), ("Aurelio", "AU"), ("Brightwell", "BW"))
APPLIANCE_LINES = ("FrostLine", "AquaPro", "PureWash", "EcoDry", "ChefMaster", "CoolBreeze", "QuickHeat",
                   "BaristaOne", "CleanBot", "SilentPro", "Vita", "Prime")

# Clothing: (category, base price, measurement used by its size chart)
CLOTHING_CATEGORIES = (
    ("Shirt", 49.0, "chest_cm"), ("T-Shirt", 24.0, "chest_cm"), ("Jacket", 129.0, "chest_cm"),
    ("Sweater", 69.0, "chest_cm"), ("Hoodie", 59.0, "chest_cm"), ("Coat", 189.0, "chest_cm"),
    ("Jeans", 79.0, "waist_cm"), ("Trousers", 64.0, "waist_cm"), ("Skirt", 54.0, "waist_cm"),
)
CLOTHING_BRANDS = ("Aurora", "Harbor", "Fjord", "Linnea", "Cobalt", "Meridian")
CLOTHING_STYLES = (
    ("Linen", "100% linen", "machine wash at 30°C, do not tumble dry"),
    ("Organic Cotton", "100% organic cotton", "machine wash at 40°C"),
    ("Merino", "100% merino wool", "hand wash cold, dry flat"),
    ("Denim", "98% cotton, 2% elastane", "wash inside out at 30°C"),
    ("Recycled Fleece", "100% recycled polyester", "machine wash at 30°C, no fabric softener"),
    ("Corduroy", "99% cotton, 1% elastane", "machine wash at 30°C, iron inside out"),
    ("Wool Blend", "70% wool, 30% polyamide", "dry clean only"),
)
COLOURS = ("black", "navy", "white", "olive", "grey", "burgundy", "beige", "teal")
SIZES = ("XS", "S", "M", "L", "XL")
# Lower bound of each size's range, per measurement; each range spans 6 cm.
SIZE_CHART_START = {"chest_cm": 80, "waist_cm": 64}
SIZE_STEP_CM = 6

CANCEL_REASONS = ("no_longer_needed", "ordered_by_mistake", "found_cheaper", "delivery_too_slow")
RETURN_REASONS = ("damaged", "wrong_size", "not_as_described", "no_longer_needed")
REFUND_REASONS = ("price_protection", "missing_item", "damaged_item", "goodwill")

RETURN_WINDOW_DAYS = {"appliances": 14, "clothing": 30}
EXCHANGE_WINDOW_DAYS = 30
PRICE_PROTECTION_DAYS = 14
INSTALLATION_LEAD_DAYS = (2, 30)

POLICIES = (
    ("POL-RETURNS", "Returns", "Clothing can be returned within 30 days of delivery and household appliances within "
     "14 days of delivery. The refund of the item's price goes back to the original payment method. Items outside "
     "the return window cannot be returned by the assistant; offer a transfer to a human agent."),
    ("POL-EXCHANGE", "Exchanges", "Clothing can be exchanged once for another size or colour of the same product "
     "within 30 days of delivery, if the new variant is in stock. Appliances are not exchanged; use a return or "
     "a repair."),
    ("POL-CANCEL", "Cancellations", "Orders can be cancelled while they are pending or processing. Shipped orders "
     "cannot be cancelled; the customer can return them after delivery."),
    ("POL-REFUND", "Refunds", "Refunds go to the original payment method. Reasons: price_protection, missing_item, "
     "damaged_item, goodwill. A refund never exceeds what was paid for the order minus earlier refunds."),
    ("POL-PRICE", "Price protection", "If a product's price drops within 14 days of the order date, the customer "
     "gets the difference between the price paid and the current price, times the quantity, as a refund with "
     "reason price_protection."),
    ("POL-INSTALL", "Installation", "Large appliances can be installed by our technicians for the fee listed on "
     "the product. Appointments are booked 2 to 30 days ahead, Monday to Saturday, once the order has shipped."),
    ("POL-REPAIR", "Repairs and warranty", "Repairs are free while the item is under warranty; the warranty runs "
     "from the delivery date for the number of months listed on the product. Ask for the fault code shown on the "
     "display and look up its meaning in the product's fault codes before booking."),
    ("POL-ADDRESS", "Shipping address", "The shipping address can be changed while the order is pending or "
     "processing. Once shipped, the carrier's address cannot be changed."),
    ("POL-INVOICE", "Invoices", "One invoice per order, personal or company. A company invoice needs the company "
     "name and its tax ID. Cancelled orders get no invoice."),
    ("POL-IDENTITY", "Identity", "Before looking up or changing anything, identify the customer by customer ID, "
     "email address or phone number. Never guess order numbers: list the customer's orders instead."),
    ("POL-HUMAN", "Human agents", "Transfer the customer to a human agent when they ask for one or when the "
     "request is outside policy."),
)
