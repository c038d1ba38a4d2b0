from __future__ import annotations

from glassloop_tools import ToolError, tool

# ---------------------------------------------------------------------------
# Produce seasons (temperate Northern Hemisphere, fixed table)
# ---------------------------------------------------------------------------

_MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]

_PRODUCE: dict[str, dict] = {
    "strawberry": {
        "zh": "草莓",
        "months": [5, 6, 7],
        "pick": "Deep red right up to the stem, glossy, smells sweet; skip white shoulders.",
        "store": "Fridge, unwashed, in one layer; eat within 2-3 days.",
    },
    "mango": {
        "zh": "芒果",
        "months": [4, 5, 6, 7, 8],
        "pick": "Gives slightly when pressed and smells fruity at the stem end.",
        "store": "Ripen at room temperature, then fridge for up to 5 days.",
    },
    "avocado": {
        "zh": "牛油果",
        "months": [3, 4, 5, 6, 7, 8, 9],
        "pick": "Yields to gentle pressure; the little stem cap comes off green underneath.",
        "store": "Room temperature until ripe, then fridge for 2-3 days.",
    },
    "asparagus": {
        "zh": "芦笋",
        "months": [4, 5, 6],
        "pick": "Firm, straight spears with tight, closed tips.",
        "store": "Stand upright in a glass of water in the fridge; use within 3 days.",
    },
    "peach": {
        "zh": "桃子",
        "months": [6, 7, 8, 9],
        "pick": "Fragrant, golden background colour, slight give near the stem.",
        "store": "Counter until soft, then fridge for 2-3 days; never stack them.",
    },
    "tomato": {
        "zh": "番茄",
        "months": [7, 8, 9],
        "pick": "Heavy for its size, even colour, smells of the vine.",
        "store": "Keep at room temperature out of the sun; the fridge dulls the taste.",
    },
    "apple": {
        "zh": "苹果",
        "months": [9, 10, 11],
        "pick": "Firm, no soft bruises, smooth skin.",
        "store": "Fridge crisper drawer, away from leafy greens; keeps for weeks.",
    },
    "pumpkin": {
        "zh": "南瓜",
        "months": [9, 10, 11],
        "pick": "Hollow sound when tapped, dry hard stem, no soft spots.",
        "store": "Whole: cool dry place for 1-2 months. Cut: wrapped in the fridge, 5 days.",
    },
    "orange": {
        "zh": "橙子",
        "months": [12, 1, 2, 3],
        "pick": "Heavy, firm, fine-grained skin.",
        "store": "Room temperature for a week or fridge for up to a month.",
    },
    "cherry": {
        "zh": "樱桃",
        "months": [6, 7],
        "pick": "Shiny, firm, green stems still attached.",
        "store": "Fridge, unwashed, in a bag; eat within 5 days.",
    },
    "watermelon": {
        "zh": "西瓜",
        "months": [6, 7, 8],
        "pick": "Creamy yellow field spot, deep hollow sound, heavy for its size.",
        "store": "Whole at room temperature; cut pieces covered in the fridge for 3-4 days.",
    },
    "spinach": {
        "zh": "菠菜",
        "months": [3, 4, 5, 10, 11],
        "pick": "Crisp dark leaves, no yellowing or slime.",
        "store": "Fridge in a bag with a paper towel; use within 4 days.",
    },
}

_PRODUCE_ALIASES: dict[str, str] = {
    "strawberry": "strawberry", "strawberries": "strawberry", "草莓": "strawberry",
    "mango": "mango", "mangoes": "mango", "mangos": "mango", "芒果": "mango",
    "avocado": "avocado", "avocados": "avocado", "牛油果": "avocado", "鳄梨": "avocado",
    "asparagus": "asparagus", "芦笋": "asparagus",
    "peach": "peach", "peaches": "peach", "桃": "peach", "桃子": "peach", "水蜜桃": "peach",
    "tomato": "tomato", "tomatoes": "tomato", "番茄": "tomato", "西红柿": "tomato",
    "apple": "apple", "apples": "apple", "苹果": "apple",
    "pumpkin": "pumpkin", "pumpkins": "pumpkin", "南瓜": "pumpkin",
    "orange": "orange", "oranges": "orange", "橙子": "orange", "橙": "orange", "橘子": "orange",
    "cherry": "cherry", "cherries": "cherry", "樱桃": "cherry", "车厘子": "cherry",
    "watermelon": "watermelon", "watermelons": "watermelon", "西瓜": "watermelon",
    "spinach": "spinach", "菠菜": "spinach",
}


@tool()
def produce_in_season(item: str) -> dict:
    """Tell when a fruit or vegetable is in season, how to pick a good one and how to store it.

    Covers a fixed list of common produce for the temperate Northern Hemisphere.

    Args:
        item: The fruit or vegetable, in English or Chinese, e.g. "strawberry",
            "mango", "avocado", "asparagus", "peach", "tomato", "apple", "pumpkin",
            "orange", "cherry", "watermelon", "spinach", "草莓", "芒果", "牛油果",
            "芦笋", "桃子", "西红柿".
    """
    key = _PRODUCE_ALIASES.get(item.strip().lower())
    if key is None:
        raise ToolError(
            "bad_input",
            f"unknown produce {item!r}; try e.g. strawberry, mango, avocado, peach, tomato",
        )
    row = _PRODUCE[key]
    return {
        "item": key,
        "item_zh": row["zh"],
        "peak_months": [_MONTHS[m - 1] for m in row["months"]],
        "how_to_pick": row["pick"],
        "storage": row["store"],
        "region": "temperate Northern Hemisphere",
    }


# ---------------------------------------------------------------------------
# Tipping customs (fixed table)
# ---------------------------------------------------------------------------

_SERVICES = ("restaurant", "taxi", "hotel", "hairdresser")

# country -> service -> (expected?, usual amount, note)
_TIPS: dict[str, dict[str, tuple[str, str, str]]] = {
    "United States": {
        "restaurant": ("expected", "18-20% of the pre-tax bill", "Servers rely on tips; 15% reads as unhappy."),
        "taxi": ("expected", "15-20% of the fare", "Apps let you add it afterwards."),
        "hotel": ("customary", "USD 3-5 per night for housekeeping, USD 1-2 per bag for porters", "Leave housekeeping cash daily with a note."),
        "hairdresser": ("expected", "15-20%", "Tip the person who washes your hair a few dollars too."),
    },
    "Canada": {
        "restaurant": ("expected", "15-20% of the pre-tax bill", "Card machines suggest percentages."),
        "taxi": ("customary", "10-15% of the fare", ""),
        "hotel": ("customary", "CAD 2-5 per night for housekeeping", ""),
        "hairdresser": ("customary", "15%", ""),
    },
    "United Kingdom": {
        "restaurant": ("optional", "10-12.5% if no service charge is on the bill", "Check the bill: a service charge is often already added."),
        "taxi": ("optional", "round up to the nearest pound", ""),
        "hotel": ("optional", "GBP 1-2 per bag for porters", "Housekeeping tips are uncommon."),
        "hairdresser": ("optional", "around 10%", ""),
    },
    "Germany": {
        "restaurant": ("customary", "5-10%, rounded up", "Say the total you want to pay when handing over money rather than leaving it on the table."),
        "taxi": ("customary", "round up or about 5-10%", ""),
        "hotel": ("optional", "EUR 1-2 per bag, EUR 1-2 per night for housekeeping", ""),
        "hairdresser": ("customary", "EUR 2-5", ""),
    },
    "France": {
        "restaurant": ("optional", "a few euros or up to 5-10% for great service", "Service is included by law (service compris)."),
        "taxi": ("optional", "round up", ""),
        "hotel": ("optional", "EUR 1-2 per night for housekeeping, EUR 1 per bag", ""),
        "hairdresser": ("optional", "EUR 2-5", ""),
    },
    "Italy": {
        "restaurant": ("optional", "round up or leave EUR 1-2 per person", "Coperto (cover charge) on the bill is not a tip."),
        "taxi": ("optional", "round up", ""),
        "hotel": ("optional", "EUR 1-2 per night for housekeeping", ""),
        "hairdresser": ("optional", "a few euros", ""),
    },
    "Japan": {
        "restaurant": ("not done", "none", "Tipping can cause confusion or offence; good service is standard."),
        "taxi": ("not done", "none", "Drivers will return exact change."),
        "hotel": ("not done", "none", "At a ryokan a small envelope (kokorozuke) is a rare, optional gesture."),
        "hairdresser": ("not done", "none", ""),
    },
    "China": {
        "restaurant": ("not done", "none", "International hotels' restaurants may add a service charge."),
        "taxi": ("not done", "none", ""),
        "hotel": ("optional", "CNY 10-20 per bag for porters at upscale hotels", ""),
        "hairdresser": ("not done", "none", ""),
    },
    "Thailand": {
        "restaurant": ("optional", "leave the small change or about 20-50 baht", "Upscale places add 10% service."),
        "taxi": ("optional", "round up to the nearest 10 baht", ""),
        "hotel": ("customary", "20-50 baht per bag or per night", ""),
        "hairdresser": ("optional", "20-50 baht", ""),
    },
    "Australia": {
        "restaurant": ("optional", "about 10% for good service", "Staff earn a full wage; tipping is a bonus."),
        "taxi": ("optional", "round up", ""),
        "hotel": ("optional", "not expected", ""),
        "hairdresser": ("optional", "not expected", ""),
    },
    "Mexico": {
        "restaurant": ("expected", "10-15%", "Check whether 'propina' is already on the bill."),
        "taxi": ("optional", "not expected unless they carry bags", ""),
        "hotel": ("customary", "MXN 20-50 per bag or per night", ""),
        "hairdresser": ("customary", "10%", ""),
    },
}

_COUNTRY_ALIASES: dict[str, str] = {
    "united states": "United States", "usa": "United States", "us": "United States",
    "u.s.": "United States", "america": "United States", "美国": "United States",
    "canada": "Canada", "加拿大": "Canada",
    "united kingdom": "United Kingdom", "uk": "United Kingdom", "britain": "United Kingdom",
    "great britain": "United Kingdom", "england": "United Kingdom", "英国": "United Kingdom",
    "germany": "Germany", "德国": "Germany",
    "france": "France", "法国": "France",
    "italy": "Italy", "意大利": "Italy",
    "japan": "Japan", "日本": "Japan",
    "china": "China", "中国": "China",
    "thailand": "Thailand", "泰国": "Thailand",
    "australia": "Australia", "澳大利亚": "Australia", "澳洲": "Australia",
    "mexico": "Mexico", "墨西哥": "Mexico",
}

_SERVICE_ALIASES: dict[str, str] = {
    "restaurant": "restaurant", "restaurants": "restaurant", "dining": "restaurant",
    "meal": "restaurant", "cafe": "restaurant", "餐厅": "restaurant", "饭店": "restaurant",
    "餐馆": "restaurant", "吃饭": "restaurant",
    "taxi": "taxi", "cab": "taxi", "uber": "taxi", "出租车": "taxi", "打车": "taxi", "的士": "taxi",
    "hotel": "hotel", "housekeeping": "hotel", "porter": "hotel", "bellboy": "hotel",
    "酒店": "hotel", "宾馆": "hotel", "客房": "hotel",
    "hairdresser": "hairdresser", "haircut": "hairdresser", "barber": "hairdresser",
    "salon": "hairdresser", "hair": "hairdresser", "理发": "hairdresser",
    "理发店": "hairdresser", "美发": "hairdresser", "理发师": "hairdresser",
}


@tool()
def tipping_guide(country: str, service: str = "restaurant") -> dict:
    """Tell whether and how much people usually tip for a service in a country.

    Reads from a fixed table of common travel destinations.

    Args:
        country: The country, in English or Chinese, e.g. "USA", "UK", "Germany",
            "France", "Italy", "Japan", "China", "Thailand", "Australia", "Mexico",
            "Canada", "美国", "日本", "德国", "泰国".
        service: What is being tipped for, e.g. "restaurant", "taxi", "hotel",
            "hairdresser", "餐厅", "出租车", "酒店", "理发". Defaults to "restaurant".
    """
    country_key = _COUNTRY_ALIASES.get(country.strip().lower())
    if country_key is None:
        raise ToolError(
            "bad_input",
            f"unknown country {country!r}; try e.g. USA, UK, Germany, Japan, Thailand",
        )
    service_key = _SERVICE_ALIASES.get(service.strip().lower())
    if service_key is None:
        raise ToolError(
            "bad_input",
            f"unknown service {service!r}; use one of {', '.join(_SERVICES)}",
        )
    expected, amount, note = _TIPS[country_key][service_key]
    result = {
        "country": country_key,
        "service": service_key,
        "tipping": expected,
        "usual_amount": amount,
    }
    if note:
        result["note"] = note
    return result
