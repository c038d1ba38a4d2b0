"""The fourth held-out set's own tools: a small cookbook and a parcel-tracking table.

Both are fixed tables (no network, no clock, no randomness), so a call gives the same
result every run.
"""

from __future__ import annotations

from typing import NamedTuple

from glassloop_tools import ToolError, tool


class Recipe(NamedTuple):
    names: tuple[str, ...]  # the English name, then the Chinese one
    ingredients: tuple[str, ...]  # English and Chinese words, for matching
    minutes: int
    serves: int
    steps: tuple[str, ...]


_RECIPES: tuple[Recipe, ...] = (
    Recipe(("Tomato and egg stir-fry", "番茄炒蛋"),
           ("tomato", "egg", "spring onion", "番茄", "西红柿", "鸡蛋", "葱"), 15, 2,
           ("Beat the eggs and scramble them softly; set aside.",
            "Fry the tomato wedges until they soften, add a pinch of sugar and salt.",
            "Return the eggs, toss, finish with spring onion.")),
    Recipe(("Kung Pao chicken", "宫保鸡丁"),
           ("chicken", "peanut", "dried chilli", "鸡肉", "鸡", "花生", "干辣椒"), 30, 3,
           ("Marinate diced chicken in soy sauce and starch.",
            "Fry dried chillies and Sichuan pepper, add the chicken.",
            "Add the sauce (vinegar, sugar, soy) and the peanuts.")),
    Recipe(("Red-braised pork belly", "红烧肉"),
           ("pork belly", "pork", "rock sugar", "五花肉", "猪肉", "冰糖"), 90, 4,
           ("Blanch the pork cubes.", "Caramelise rock sugar, brown the pork in it.",
            "Add soy sauce, wine and water; simmer for an hour, then reduce.")),
    Recipe(("Mapo tofu", "麻婆豆腐"),
           ("tofu", "minced beef", "doubanjiang", "豆腐", "牛肉末", "豆瓣酱"), 25, 3,
           ("Simmer tofu cubes in salted water.", "Fry the mince with doubanjiang.",
            "Add stock and tofu, thicken, top with Sichuan pepper.")),
    Recipe(("Egg fried rice", "蛋炒饭"),
           ("rice", "egg", "spring onion", "米饭", "鸡蛋", "葱"), 12, 2,
           ("Use day-old rice.", "Scramble the eggs, add the rice and stir-fry hot.",
            "Season with salt and soy sauce, add spring onion.")),
    Recipe(("Spaghetti carbonara", "培根蛋酱意面"),
           ("spaghetti", "pasta", "egg", "guanciale", "bacon", "pecorino", "意面", "鸡蛋", "培根"),
           20, 2,
           ("Boil the pasta.", "Crisp the guanciale.",
            "Off the heat, toss the pasta with egg yolks, cheese and a splash of pasta water.")),
    Recipe(("Chicken curry", "咖喱鸡"),
           ("chicken", "potato", "onion", "curry", "鸡肉", "鸡", "土豆", "洋葱", "咖喱"), 45, 4,
           ("Brown the chicken and onion.", "Add potato, curry paste and water.",
            "Simmer until the potato is soft.")),
    Recipe(("Miso soup", "味噌汤"),
           ("miso", "tofu", "seaweed", "dashi", "味噌", "豆腐", "海带"), 10, 2,
           ("Warm the dashi.", "Add tofu and seaweed.", "Stir in the miso off the boil.")),
    Recipe(("Pancakes", "松饼"),
           ("flour", "egg", "milk", "butter", "面粉", "鸡蛋", "牛奶", "黄油"), 20, 3,
           ("Whisk flour, eggs and milk into a batter.", "Rest it for ten minutes.",
            "Cook in a buttered pan until golden on both sides.")),
    Recipe(("Smashed cucumber salad", "拍黄瓜"),
           ("cucumber", "garlic", "vinegar", "黄瓜", "大蒜", "醋"), 8, 2,
           ("Smash and cut the cucumber.", "Toss with garlic, vinegar, salt and chilli oil.")),
    Recipe(("Beef noodle soup", "牛肉面"),
           ("beef", "noodles", "star anise", "牛肉", "面条", "八角"), 120, 4,
           ("Braise the beef with star anise and soy for two hours.",
            "Cook the noodles, ladle over the broth and beef.")),
)


@tool
def find_recipe(query: str, max_minutes: int | None = None) -> dict:
    """Look up recipes in a small cookbook by dish name or ingredient.

    Returns each matching dish with its cooking time, servings, ingredients and steps.

    Args:
        query: an ingredient or part of a dish's name, in English or Chinese
        max_minutes: only dishes that take at most this many minutes
    """
    needle = query.strip().casefold()
    if not needle:
        raise ToolError("invalid_query", "query is empty: give an ingredient or a dish name")
    if max_minutes is not None and max_minutes <= 0:
        raise ToolError("invalid_max_minutes", f"max_minutes must be positive, got {max_minutes}")
    found = [{"name": " / ".join(r.names), "minutes": r.minutes, "serves": r.serves,
              "ingredients": list(r.ingredients), "steps": list(r.steps)}
             for r in _RECIPES
             if any(needle in text.casefold() for text in (*r.names, *r.ingredients))
             and (max_minutes is None or r.minutes <= max_minutes)]
    return {"query": query, "max_minutes": max_minutes, "count": len(found), "recipes": found}


class Parcel(NamedTuple):
    carrier: str
    status: str
    location: str
    updated: str
    expected: str
    contents: str


_PARCELS: dict[str, Parcel] = {
    "SF1403827765": Parcel("SF Express (顺丰)", "out for delivery", "深圳 南山区 派送点",
                           "2026-11-02 08:40", "2026-11-02", "phone case"),
    "SF2210093381": Parcel("SF Express (顺丰)", "in transit", "杭州 转运中心",
                           "2026-11-01 22:15", "2026-11-03", "tea set"),
    "ZT7788120034": Parcel("ZTO Express (中通)", "in transit", "郑州 分拨中心",
                           "2026-11-01 19:02", "2026-11-04", "winter jacket"),
    "YT5590017724": Parcel("YTO Express (圆通)", "held: address incomplete", "上海 浦东 网点",
                           "2026-10-29 14:30", "unknown", "desk lamp"),
    "JD0098812345": Parcel("JD Logistics (京东物流)", "delivered", "北京 朝阳区 快递柜",
                           "2026-10-31 17:55", "2026-10-31", "rice cooker"),
    "JJD0145000721": Parcel("DHL", "customs clearance", "Leipzig hub",
                            "2026-11-01 06:10", "2026-11-06", "camera lens"),
    "1Z999AA10123456784": Parcel("UPS", "delivered", "Manchester, left with neighbour",
                                 "2026-10-30 12:20", "2026-10-30", "running shoes"),
    "RM482011937GB": Parcel("Royal Mail", "awaiting collection", "Camden delivery office",
                            "2026-11-01 11:00", "2026-11-01", "birthday card"),
    "EMS880213457CN": Parcel("China Post EMS (中国邮政)", "in transit", "广州 国际邮件处理中心",
                             "2026-10-30 09:45", "2026-11-08", "board game"),
}


@tool
def track_parcel(tracking_number: str) -> dict:
    """Show where a parcel is and whether it has been delivered.

    Returns the carrier, the latest status and place, when it was last updated and the
    expected delivery date.

    Args:
        tracking_number: the parcel's tracking number, e.g. "SF1403827765"
    """
    number = "".join(tracking_number.split()).upper()
    if not number:
        raise ToolError("invalid_tracking_number", "tracking_number is empty")
    parcel = _PARCELS.get(number)
    if parcel is None:
        raise ToolError("unknown_tracking_number", f"no parcel with tracking number {tracking_number!r}")
    return {"tracking_number": number, **parcel._asdict()}
