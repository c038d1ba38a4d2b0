"""Two read-only everyday tools: museum opening hours and stain removal advice."""

from __future__ import annotations

from glassloop_tools import ToolError, tool

_DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_DAY_ALIASES = {
    "mon": "monday", "tue": "tuesday", "tues": "tuesday", "wed": "wednesday",
    "thu": "thursday", "thur": "thursday", "thurs": "thursday", "fri": "friday",
    "sat": "saturday", "sun": "sunday",
    "周一": "monday", "星期一": "monday", "周二": "tuesday", "星期二": "tuesday",
    "周三": "wednesday", "星期三": "wednesday", "周四": "thursday", "星期四": "thursday",
    "周五": "friday", "星期五": "friday", "周六": "saturday", "星期六": "saturday",
    "周日": "sunday", "星期日": "sunday", "星期天": "sunday", "周天": "sunday",
}

# name -> (aliases, city, closed weekdays, regular hours, late-opening {day: hours}, ticket)
_MUSEUMS = {
    "Louvre": (("louvre", "musée du louvre", "卢浮宫"), "Paris", ("tuesday",),
               "09:00-18:00", {"friday": "09:00-21:45"}, "EUR 22"),
    "British Museum": (("british museum", "大英博物馆"), "London", (),
                       "10:00-17:00", {"friday": "10:00-20:30"}, "free (special exhibitions extra)"),
    "Palace Museum": (("palace museum", "forbidden city", "故宫", "故宫博物院", "紫禁城"), "Beijing",
                      ("monday",), "08:30-17:00", {}, "CNY 60 (Apr-Oct), CNY 40 (Nov-Mar); book online"),
    "Rijksmuseum": (("rijksmuseum", "荷兰国立博物馆"), "Amsterdam", (),
                    "09:00-17:00", {}, "EUR 25, under 18 free"),
    "MoMA": (("moma", "museum of modern art", "现代艺术博物馆"), "New York", (),
             "10:30-17:30", {"saturday": "10:30-19:00"}, "USD 30"),
    "Shanghai Museum": (("shanghai museum", "上海博物馆", "上博"), "Shanghai", ("monday",),
                        "09:00-17:00", {"friday": "09:00-21:00"}, "free, reservation required"),
    "Prado": (("prado", "museo del prado", "普拉多博物馆"), "Madrid", (),
              "10:00-20:00", {"sunday": "10:00-19:00"}, "EUR 15, free last two hours"),
}


def _find_museum(name: str) -> str:
    key = name.strip().lower()
    if not key:
        raise ToolError("bad_input", "Give the name of a museum.")
    for canonical, (aliases, *_rest) in _MUSEUMS.items():
        if key == canonical.lower() or key in aliases or any(a in key for a in aliases):
            return canonical
    raise ToolError("bad_input", f"Unknown museum {name!r}. Known: {', '.join(_MUSEUMS)}.")


def _norm_day(day: str) -> str:
    d = day.strip().lower()
    d = _DAY_ALIASES.get(d, d)
    if d not in _DAYS:
        raise ToolError("bad_input", f"Unknown weekday {day!r}; use a name such as 'monday'.")
    return d


@tool
def museum_hours(museum: str, day: str = "") -> dict:
    """Look up the opening hours and ticket price of a well-known museum.

    Args:
        museum: the museum's name, e.g. "Louvre" or "故宫"
        day: a weekday name such as "monday"; leave empty for the whole week
    """
    name = _find_museum(museum)
    _aliases, city, closed, hours, late, ticket = _MUSEUMS[name]
    week = {d: ("closed" if d in closed else late.get(d, hours)) for d in _DAYS}
    result = {"museum": name, "city": city, "ticket": ticket}
    if day.strip():
        d = _norm_day(day)
        result["day"] = d
        result["hours"] = week[d]
        result["open"] = week[d] != "closed"
    else:
        result["hours"] = week
    return result


# stain -> (aliases, {fabric: steps}, general tip)
_STAINS = {
    "red wine": (("red wine", "wine", "红酒", "葡萄酒"),
                 {"cotton": "Blot, cover with salt, then rinse from the back with cold water and wash with an enzyme detergent.",
                  "wool": "Blot, dab with cold water and a little wool detergent; never rub or use hot water.",
                  "silk": "Blot gently, dab with cold water and a drop of white vinegar; take to a dry cleaner if it stays.",
                  "polyester": "Blot, soak in cold water with dish soap for 30 minutes, then machine wash."},
                 "Act fast and use cold water; heat sets the tannins."),
    "coffee": (("coffee", "咖啡", "latte", "拿铁"),
               {"cotton": "Rinse from the back with cold water, rub in liquid detergent, wait 5 minutes, wash warm.",
                "wool": "Blot, dab with cold water and a wool-safe detergent; dry flat.",
                "silk": "Blot, dab with cold water; a dry cleaner is safest.",
                "polyester": "Rinse cold, pre-treat with liquid detergent, wash at 40 °C."},
               "Remove milk stains with cold water first; hot water cooks the protein."),
    "grease": (("grease", "oil", "油", "油渍", "cooking oil", "butter", "黄油"),
               {"cotton": "Cover with cornstarch or baby powder for 15 minutes, brush off, work in dish soap, wash in the warmest water the label allows.",
                "wool": "Cover with cornstarch, brush off, dab with a little dish soap and lukewarm water.",
                "silk": "Cover with talc overnight and brush off; leave the rest to a dry cleaner.",
                "polyester": "Work in dish soap, leave 10 minutes, wash warm."},
               "Absorb first, then degrease with dish soap."),
    "ink": (("ink", "ballpoint", "pen", "墨水", "圆珠笔", "笔"),
            {"cotton": "Put a towel underneath and dab with rubbing alcohol until no more ink transfers, then wash.",
             "wool": "Dab with a little rubbing alcohol on a cotton swab; test a hidden spot first.",
             "silk": "Do not treat at home; take to a dry cleaner.",
             "polyester": "Dab with rubbing alcohol or hand sanitizer, rinse, wash."},
            "Dab, never rub; rubbing spreads the ink."),
    "blood": (("blood", "血", "血迹"),
              {"cotton": "Rinse with cold water, dab with hydrogen peroxide on white cotton, wash cold.",
               "wool": "Dab with cold salt water, rinse, wash with wool detergent.",
               "silk": "Dab with cold water only; a dry cleaner for anything old.",
               "polyester": "Soak in cold water with an enzyme detergent, then wash cold."},
              "Always cold water; warm water sets blood."),
    "grass": (("grass", "草", "草渍"),
              {"cotton": "Rub in liquid enzyme detergent, leave 15 minutes, wash warm.",
               "wool": "Dab with rubbing alcohol, rinse cold, wash with wool detergent.",
               "silk": "Take to a dry cleaner.",
               "polyester": "Pre-treat with enzyme detergent, wash warm."},
              "Enzyme detergents break down chlorophyll."),
    "soy sauce": (("soy sauce", "soy", "酱油"),
                  {"cotton": "Rinse cold from the back, rub in dish soap and a splash of white vinegar, wash.",
                   "wool": "Blot, dab with cold water and a little vinegar, then wool detergent.",
                   "silk": "Blot and dab with cold water; dry cleaner if it stays.",
                   "polyester": "Rinse cold, pre-treat with liquid detergent, wash."},
                  "Rinse cold before it dries."),
}
_FABRICS = {"cotton": ("cotton", "棉", "纯棉", "denim", "牛仔"),
            "wool": ("wool", "羊毛", "cashmere", "羊绒", "毛衣", "sweater"),
            "silk": ("silk", "真丝", "丝绸", "丝"),
            "polyester": ("polyester", "涤纶", "synthetic", "化纤", "nylon", "尼龙")}


@tool
def stain_removal(stain: str, fabric: str = "cotton") -> dict:
    """Give step-by-step advice for getting a stain out of a fabric.

    Args:
        stain: what made the stain, e.g. "red wine", "coffee", "ink", "酱油"
        fabric: the fabric: cotton, wool, silk or polyester (default cotton)
    """
    key = stain.strip().lower()
    if not key:
        raise ToolError("bad_input", "Say what the stain is.")
    # prefer the longest alias found, so "酱油" is soy sauce and not oil
    best = (0, None)
    for name, (aliases, _steps, _tip) in _STAINS.items():
        for a in (name, *aliases):
            if a in key and len(a) > best[0]:
                best = (len(a), name)
    found = best[1]
    if found is None:
        raise ToolError("bad_input", f"No advice for {stain!r}. Known stains: {', '.join(_STAINS)}.")
    fkey = (fabric or "cotton").strip().lower()
    fbest = (0, None)
    for name, aliases in _FABRICS.items():
        for a in (name, *aliases):
            if a in fkey and len(a) > fbest[0]:
                fbest = (len(a), name)
    fab = fbest[1]
    if fab is None:
        raise ToolError("bad_input", f"Unknown fabric {fabric!r}; use cotton, wool, silk or polyester.")
    _aliases, steps, tip = _STAINS[found]
    return {"stain": found, "fabric": fab, "steps": steps[fab], "tip": tip}
