from __future__ import annotations

import re

from glassloop_tools import ToolError, tool

# ---------------------------------------------------------------------------
# Food storage: how long common foods keep in the fridge, freezer or pantry.
# Values are conservative home-kitchen guidelines; None means "not advised".
# ---------------------------------------------------------------------------

_FOODS: dict[str, dict] = {
    "cooked rice": {
        "zh": "米饭",
        "aliases": ["rice", "leftover rice", "米饭", "剩饭", "熟米饭"],
        "fridge": "3-4 days",
        "freezer": "1 month",
        "pantry": None,
        "tip": "Cool within an hour of cooking; reheat until steaming hot, only once.",
    },
    "raw chicken": {
        "zh": "生鸡肉",
        "aliases": ["chicken", "raw chicken", "chicken breast", "鸡肉", "生鸡肉", "鸡胸肉", "鸡"],
        "fridge": "1-2 days",
        "freezer": "9 months",
        "pantry": None,
        "tip": "Keep on the bottom shelf so juices cannot drip onto other food.",
    },
    "ground beef": {
        "zh": "牛肉馅",
        "aliases": ["ground beef", "minced beef", "mince", "beef mince", "牛肉馅", "牛肉末", "绞肉"],
        "fridge": "1-2 days",
        "freezer": "3-4 months",
        "pantry": None,
        "tip": "Flatten in a freezer bag so it freezes and thaws quickly.",
    },
    "fresh fish": {
        "zh": "鲜鱼",
        "aliases": ["fish", "fresh fish", "salmon", "鱼", "鲜鱼", "三文鱼"],
        "fridge": "1-2 days",
        "freezer": "3-6 months",
        "pantry": None,
        "tip": "Thaw overnight in the fridge, never on the counter.",
    },
    "eggs": {
        "zh": "鸡蛋",
        "aliases": ["egg", "eggs", "raw eggs", "鸡蛋", "蛋"],
        "fridge": "3-5 weeks",
        "freezer": "12 months (beaten, out of the shell)",
        "pantry": None,
        "tip": "Store in the carton on a shelf, not in the door.",
    },
    "milk": {
        "zh": "牛奶",
        "aliases": ["milk", "opened milk", "牛奶", "鲜奶"],
        "fridge": "5-7 days after opening",
        "freezer": "3 months",
        "pantry": None,
        "tip": "Frozen milk may separate; shake well after thawing.",
    },
    "yogurt": {
        "zh": "酸奶",
        "aliases": ["yogurt", "yoghurt", "酸奶"],
        "fridge": "1-2 weeks",
        "freezer": "1-2 months",
        "pantry": None,
        "tip": "A little liquid on top is normal whey; stir it back in.",
    },
    "hard cheese": {
        "zh": "硬质奶酪",
        "aliases": ["cheese", "hard cheese", "cheddar", "parmesan", "奶酪", "芝士", "硬奶酪"],
        "fridge": "3-4 weeks after opening",
        "freezer": "6 months",
        "pantry": None,
        "tip": "Wrap in baking paper, then loosely in plastic, so it can breathe.",
    },
    "butter": {
        "zh": "黄油",
        "aliases": ["butter", "黄油", "牛油"],
        "fridge": "1-3 months",
        "freezer": "6-9 months",
        "pantry": "1-2 days in a covered dish",
        "tip": "Keep it wrapped; butter picks up fridge smells easily.",
    },
    "bread": {
        "zh": "面包",
        "aliases": ["bread", "loaf", "sliced bread", "面包", "吐司"],
        "fridge": "7-14 days (goes stale faster)",
        "freezer": "3 months",
        "pantry": "3-5 days",
        "tip": "Freeze sliced and toast straight from frozen.",
    },
    "tofu": {
        "zh": "豆腐",
        "aliases": ["tofu", "bean curd", "豆腐", "嫩豆腐", "老豆腐"],
        "fridge": "3-5 days after opening, in fresh water changed daily",
        "freezer": "3-5 months",
        "pantry": None,
        "tip": "Freezing makes tofu chewier and spongier, which is good for stews.",
    },
    "dumplings": {
        "zh": "饺子",
        "aliases": ["dumplings", "raw dumplings", "potstickers", "饺子", "生饺子", "水饺"],
        "fridge": "1 day (uncooked)",
        "freezer": "3 months",
        "pantry": None,
        "tip": "Freeze spaced out on a tray first, then bag them so they don't stick.",
    },
    "soup": {
        "zh": "汤",
        "aliases": ["soup", "stew", "broth", "leftover soup", "汤", "剩汤", "炖菜"],
        "fridge": "3-4 days",
        "freezer": "2-3 months",
        "pantry": None,
        "tip": "Bring to a full boil before eating leftovers.",
    },
    "cooked leftovers": {
        "zh": "剩菜",
        "aliases": ["leftovers", "cooked leftovers", "takeaway", "takeout", "剩菜", "外卖", "剩饭菜"],
        "fridge": "3-4 days",
        "freezer": "2-3 months",
        "pantry": None,
        "tip": "Refrigerate within two hours of cooking.",
    },
    "cooked pasta": {
        "zh": "熟意面",
        "aliases": ["pasta", "cooked pasta", "spaghetti", "noodles", "意面", "意大利面", "面条"],
        "fridge": "3-5 days",
        "freezer": "1-2 months",
        "pantry": None,
        "tip": "Toss with a little oil before chilling so it doesn't clump.",
    },
    "bananas": {
        "zh": "香蕉",
        "aliases": ["banana", "bananas", "香蕉"],
        "fridge": "5-7 days once ripe (skin darkens)",
        "freezer": "2-3 months, peeled",
        "pantry": "2-5 days",
        "tip": "Frozen overripe bananas are ideal for smoothies and baking.",
    },
}

_PLACES: dict[str, str] = {
    "fridge": "fridge",
    "refrigerator": "fridge",
    "冰箱": "fridge",
    "冷藏": "fridge",
    "冷藏室": "fridge",
    "freezer": "freezer",
    "frozen": "freezer",
    "冷冻": "freezer",
    "冷冻室": "freezer",
    "冷冻柜": "freezer",
    "pantry": "pantry",
    "counter": "pantry",
    "room temperature": "pantry",
    "cupboard": "pantry",
    "常温": "pantry",
    "室温": "pantry",
}


def _find_food(food: str) -> str:
    key = food.strip().lower()
    if not key:
        raise ToolError("bad_input", "Please name a food, e.g. 'cooked rice' or '豆腐'.")
    for name, info in _FOODS.items():
        if key == name or key == info["zh"] or key in info["aliases"]:
            return name
    for name, info in _FOODS.items():
        for alias in [name, *info["aliases"]]:
            if alias in key:
                return name
    known = ", ".join(sorted(_FOODS))
    raise ToolError("bad_input", f"Unknown food '{food}'. Known foods: {known}.")


@tool()
def food_storage(food: str, place: str = "fridge") -> dict:
    """Tell how long a common food keeps in the fridge, freezer or pantry.

    Args:
        food: The food, in English or Chinese, e.g. "cooked rice", "raw chicken",
            "tofu", "饺子", "牛奶".
        place: Where it is stored: "fridge", "freezer" or "pantry"
            (also "冷藏", "冷冻", "常温").
    """
    where = _PLACES.get(place.strip().lower())
    if where is None:
        raise ToolError("bad_input", f"Unknown place '{place}'. Use fridge, freezer or pantry.")
    name = _find_food(food)
    info = _FOODS[name]
    keeps = info[where]
    return {
        "food": name,
        "food_zh": info["zh"],
        "place": where,
        "keeps_for": keeps if keeps is not None else "not recommended",
        "tip": info["tip"],
    }


# ---------------------------------------------------------------------------
# Wedding anniversary names and gift themes.
# ---------------------------------------------------------------------------

_ANNIVERSARIES: dict[int, dict] = {
    1: {"traditional": "paper", "modern": "clocks", "zh": "纸婚"},
    2: {"traditional": "cotton", "modern": "china", "zh": "棉婚"},
    3: {"traditional": "leather", "modern": "crystal or glass", "zh": "皮革婚"},
    4: {"traditional": "fruit and flowers", "modern": "appliances", "zh": "花果婚"},
    5: {"traditional": "wood", "modern": "silverware", "zh": "木婚"},
    6: {"traditional": "iron (or sugar)", "modern": "wood", "zh": "铁婚"},
    7: {"traditional": "wool or copper", "modern": "desk sets", "zh": "铜婚"},
    8: {"traditional": "bronze", "modern": "linen and lace", "zh": "陶器婚"},
    9: {"traditional": "pottery or willow", "modern": "leather", "zh": "柳婚"},
    10: {"traditional": "tin or aluminium", "modern": "diamond jewellery", "zh": "锡婚"},
    11: {"traditional": "steel", "modern": "fashion jewellery", "zh": "钢婚"},
    12: {"traditional": "silk or linen", "modern": "pearls", "zh": "丝婚"},
    15: {"traditional": "crystal", "modern": "watches", "zh": "水晶婚"},
    20: {"traditional": "china", "modern": "platinum", "zh": "瓷婚"},
    25: {"traditional": "silver", "modern": "sterling silver", "zh": "银婚"},
    30: {"traditional": "pearl", "modern": "diamond", "zh": "珍珠婚"},
    40: {"traditional": "ruby", "modern": "ruby", "zh": "红宝石婚"},
    50: {"traditional": "gold", "modern": "gold", "zh": "金婚"},
    60: {"traditional": "diamond", "modern": "diamond", "zh": "钻石婚"},
}

_NAMES: dict[str, int] = {
    "paper": 1, "cotton": 2, "leather": 3, "wood": 5, "wooden": 5, "iron": 6,
    "sugar": 6, "copper": 7, "wool": 7, "bronze": 8, "pottery": 9, "willow": 9,
    "tin": 10, "aluminium": 10, "aluminum": 10, "steel": 11, "silk": 12,
    "crystal": 15, "china": 20, "porcelain": 20, "silver": 25, "pearl": 30,
    "ruby": 40, "gold": 50, "golden": 50, "diamond": 60,
    "布婚": 2, "糖婚": 6, "毛婚": 7, "电器婚": 8, "陶婚": 8, "链婚": 12,
}
for _years, _info in _ANNIVERSARIES.items():
    _NAMES[_info["zh"]] = _years

_ZH_DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5,
              "六": 6, "七": 7, "八": 8, "九": 9}


def _zh_number(text: str) -> int | None:
    if not text or any(ch not in _ZH_DIGITS and ch != "十" for ch in text):
        return None
    if "十" not in text:
        return _ZH_DIGITS[text] if len(text) == 1 else None
    tens, _, ones = text.partition("十")
    value = (_ZH_DIGITS.get(tens, 0) if tens else 1) * 10
    if ones:
        if ones not in _ZH_DIGITS:
            return None
        value += _ZH_DIGITS[ones]
    return value


def _parse_years(years: str) -> int:
    raw = str(years).strip().lower()
    for word in ("wedding anniversary", "anniversary", "wedding", "years", "year",
                 "周年", "结婚", "年"):
        raw = raw.replace(word, "")
    raw = raw.strip()
    if raw in _NAMES:
        return _NAMES[raw]
    if raw.endswith("婚") and raw[:-1] in _NAMES:
        return _NAMES[raw[:-1]]
    match = re.fullmatch(r"(\d+)\s*(st|nd|rd|th)?", raw)
    if match:
        return int(match.group(1))
    number = _zh_number(raw.removeprefix("第"))
    if number is not None:
        return number
    raise ToolError("bad_input", f"Could not understand '{years}'. Give a number of years "
                                 "like '10' or a name like 'silver' / '银婚'.")


@tool()
def anniversary_gift(years: str) -> dict:
    """Look up the traditional name and gift themes for a wedding anniversary.

    Args:
        years: How many years married, e.g. "1", "10", "25th", "五周年"; a named
            anniversary such as "silver", "golden" or "银婚" also works.
    """
    count = _parse_years(years)
    info = _ANNIVERSARIES.get(count)
    if info is None:
        known = ", ".join(str(n) for n in _ANNIVERSARIES)
        raise ToolError("bad_input", f"No entry for {count} years. Known: {known}.")
    return {
        "years": count,
        "traditional_gift": info["traditional"],
        "modern_gift": info["modern"],
        "name_en": "golden anniversary" if count == 50
        else f"{info['traditional'].split(' ')[0]} anniversary",
        "name_zh": info["zh"],
    }
