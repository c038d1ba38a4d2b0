"""Two read-only user tools for the fresh6 evaluation set.

Each tool answers from a fixed in-memory table: no network, no clock, no randomness.
"""

from __future__ import annotations

from glassloop_tools import ToolError, tool

# ---------------------------------------------------------------------------
# caffeine_content
# ---------------------------------------------------------------------------

# drink -> size -> (volume in ml, caffeine in mg)
_CAFFEINE = {
    "espresso": {"small": (30, 63), "medium": (60, 126), "large": (90, 189)},
    "americano": {"small": (240, 75), "medium": (350, 150), "large": (470, 225)},
    "latte": {"small": (240, 75), "medium": (350, 150), "large": (470, 150)},
    "cappuccino": {"small": (240, 75), "medium": (350, 150), "large": (470, 150)},
    "flat white": {"small": (160, 130), "medium": (240, 195), "large": (350, 195)},
    "drip coffee": {"small": (240, 95), "medium": (350, 145), "large": (470, 190)},
    "cold brew": {"small": (350, 155), "medium": (470, 205), "large": (700, 310)},
    "decaf coffee": {"small": (240, 3), "medium": (350, 5), "large": (470, 7)},
    "black tea": {"small": (240, 47), "medium": (350, 70), "large": (470, 94)},
    "green tea": {"small": (240, 28), "medium": (350, 42), "large": (470, 56)},
    "matcha": {"small": (240, 70), "medium": (350, 105), "large": (470, 140)},
    "cola": {"small": (330, 32), "medium": (500, 48), "large": (1000, 96)},
    "energy drink": {"small": (250, 80), "medium": (355, 114), "large": (500, 160)},
    "hot chocolate": {"small": (240, 5), "medium": (350, 8), "large": (470, 10)},
}

_DRINK_ALIASES = {
    "coffee": "drip coffee", "filter coffee": "drip coffee", "brewed coffee": "drip coffee",
    "咖啡": "drip coffee", "美式": "americano", "美式咖啡": "americano",
    "浓缩": "espresso", "浓缩咖啡": "espresso", "意式浓缩": "espresso",
    "拿铁": "latte", "卡布奇诺": "cappuccino", "馥芮白": "flat white", "澳白": "flat white",
    "冷萃": "cold brew", "冷萃咖啡": "cold brew", "低因": "decaf coffee", "低因咖啡": "decaf coffee",
    "decaf": "decaf coffee", "红茶": "black tea", "tea": "black tea", "绿茶": "green tea",
    "抹茶": "matcha", "matcha latte": "matcha", "抹茶拿铁": "matcha",
    "coke": "cola", "可乐": "cola", "可口可乐": "cola", "pepsi": "cola",
    "red bull": "energy drink", "红牛": "energy drink", "功能饮料": "energy drink",
    "能量饮料": "energy drink", "热巧克力": "hot chocolate", "cocoa": "hot chocolate",
}

_SIZE_ALIASES = {
    "small": "small", "s": "small", "short": "small", "single": "small", "小杯": "small", "小": "small",
    "medium": "medium", "m": "medium", "regular": "medium", "tall": "medium", "double": "medium",
    "中杯": "medium", "中": "medium",
    "large": "large", "l": "large", "grande": "large", "venti": "large", "triple": "large",
    "大杯": "large", "大": "large", "超大杯": "large",
}


@tool()
def caffeine_content(drink: str, size: str = "medium") -> dict:
    """Look up roughly how much caffeine (in mg) one serving of a common drink contains.

    Args:
        drink: the drink, e.g. espresso, latte, cold brew, green tea, cola, energy drink
        size: serving size: small, medium or large (for espresso: single, double or triple shot)
    """
    key = drink.strip().lower()
    key = _DRINK_ALIASES.get(key, key)
    if key not in _CAFFEINE:
        raise ToolError("bad_input", f"unknown drink {drink!r}; known drinks: {', '.join(sorted(_CAFFEINE))}")
    size_key = _SIZE_ALIASES.get(size.strip().lower())
    if size_key is None:
        raise ToolError("bad_input", f"unknown size {size!r}; use small, medium or large")
    volume, mg = _CAFFEINE[key][size_key]
    return {
        "drink": key,
        "size": size_key,
        "volume_ml": volume,
        "caffeine_mg": mg,
        "share_of_400mg_daily_guide": f"{round(mg / 400 * 100)}%",
    }


# ---------------------------------------------------------------------------
# pool_hours
# ---------------------------------------------------------------------------

_DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

_DAY_ALIASES = {
    "mon": "monday", "tue": "tuesday", "tues": "tuesday", "wed": "wednesday", "thu": "thursday",
    "thur": "thursday", "thurs": "thursday", "fri": "friday", "sat": "saturday", "sun": "sunday",
    "周一": "monday", "星期一": "monday", "礼拜一": "monday",
    "周二": "tuesday", "星期二": "tuesday", "礼拜二": "tuesday",
    "周三": "wednesday", "星期三": "wednesday", "礼拜三": "wednesday",
    "周四": "thursday", "星期四": "thursday", "礼拜四": "thursday",
    "周五": "friday", "星期五": "friday", "礼拜五": "friday",
    "周六": "saturday", "星期六": "saturday", "礼拜六": "saturday",
    "周日": "sunday", "周天": "sunday", "星期日": "sunday", "星期天": "sunday", "礼拜天": "sunday",
}

_POOLS = {
    "Riverside Leisure Centre": {
        "aliases": ["riverside", "滨江", "滨江游泳馆", "滨江泳池"],
        "indoor": True,
        "days": {
            **{d: {"open": "06:30", "close": "21:30", "lane_swim": ["06:30-09:00", "12:00-13:30", "19:30-21:30"]}
               for d in _DAYS[:5]},
            "saturday": {"open": "08:00", "close": "18:00", "lane_swim": ["08:00-10:00"]},
            "sunday": {"open": "08:00", "close": "16:00", "lane_swim": ["08:00-09:30"]},
        },
        "note": "Family splash session Sat/Sun 14:00-16:00; lanes roped off.",
    },
    "Northgate Baths": {
        "aliases": ["northgate", "北门", "北门游泳馆", "北门泳池"],
        "indoor": True,
        "days": {
            "monday": None,
            "tuesday": {"open": "07:00", "close": "20:00", "lane_swim": ["07:00-09:00", "17:00-20:00"]},
            "wednesday": {"open": "07:00", "close": "20:00", "lane_swim": ["07:00-09:00"]},
            "thursday": {"open": "07:00", "close": "21:00", "lane_swim": ["07:00-09:00", "18:00-21:00"]},
            "friday": {"open": "07:00", "close": "20:00", "lane_swim": ["07:00-09:00"]},
            "saturday": {"open": "09:00", "close": "17:00", "lane_swim": []},
            "sunday": {"open": "09:00", "close": "17:00", "lane_swim": ["09:00-11:00"]},
        },
        "note": "Closed every Monday for cleaning. Women-only session Wednesday 19:00-20:00.",
    },
    "Lakeview Aquatic Centre": {
        "aliases": ["lakeview", "湖景", "湖景游泳馆", "湖景泳池"],
        "indoor": True,
        "days": {
            **{d: {"open": "06:00", "close": "22:00", "lane_swim": ["06:00-10:00", "18:00-22:00"]}
               for d in _DAYS[:5]},
            "saturday": {"open": "07:00", "close": "20:00", "lane_swim": ["07:00-11:00"]},
            "sunday": {"open": "07:00", "close": "20:00", "lane_swim": ["07:00-11:00"]},
        },
        "note": "50 m pool; diving pool open weekends only.",
    },
    "Eastside Lido": {
        "aliases": ["eastside", "eastside lido", "东区", "东区露天泳池", "东区泳池"],
        "indoor": False,
        "days": {
            "monday": None,
            **{d: {"open": "10:00", "close": "19:00", "lane_swim": ["10:00-11:30"]} for d in _DAYS[1:5]},
            "saturday": {"open": "09:00", "close": "19:00", "lane_swim": ["09:00-10:00"]},
            "sunday": {"open": "09:00", "close": "19:00", "lane_swim": []},
        },
        "note": "Outdoor, heated; open May to September only. Closed Mondays.",
    },
}


def _find_pool(name: str) -> str:
    q = name.strip().lower()
    for full, info in _POOLS.items():
        if q == full.lower() or q in info["aliases"]:
            return full
    for full, info in _POOLS.items():
        if any(a in q for a in info["aliases"]) or q in full.lower():
            return full
    raise ToolError("bad_input", f"unknown pool {name!r}; known pools: {', '.join(_POOLS)}")


@tool()
def pool_hours(pool: str, weekday: str = "") -> dict:
    """Get the opening hours and lane-swimming times of a public swimming pool in town.

    Args:
        pool: the pool's name: Riverside, Northgate, Lakeview or Eastside Lido
        weekday: day of the week, e.g. monday or saturday; leave empty for the whole week
    """
    full = _find_pool(pool)
    info = _POOLS[full]
    base = {"pool": full, "indoor": info["indoor"], "note": info["note"]}
    if not weekday.strip():
        week = {d: (info["days"][d] or "closed") for d in _DAYS}
        return {**base, "week": week}
    day = weekday.strip().lower()
    day = _DAY_ALIASES.get(day, day)
    if day not in _DAYS:
        raise ToolError("bad_input", f"unknown weekday {weekday!r}; use monday ... sunday")
    hours = info["days"][day]
    if hours is None:
        return {**base, "weekday": day, "is_open": False}
    return {**base, "weekday": day, "is_open": True, "opens": hours["open"], "closes": hours["close"],
            "lane_swim": hours["lane_swim"]}
