from __future__ import annotations

from glassloop_tools import ToolError, tool

# Canonical country names and the aliases (English and Chinese) that map to them.
_COUNTRY_ALIASES: dict[str, list[str]] = {
    "United Kingdom": ["uk", "u.k.", "united kingdom", "britain", "great britain", "england",
                       "scotland", "wales", "gb", "英国", "英格兰", "苏格兰"],
    "Ireland": ["ireland", "republic of ireland", "爱尔兰"],
    "United States": ["us", "u.s.", "usa", "united states", "united states of america",
                      "america", "美国"],
    "Canada": ["canada", "加拿大"],
    "Mexico": ["mexico", "墨西哥"],
    "Brazil": ["brazil", "巴西"],
    "Japan": ["japan", "日本"],
    "China": ["china", "mainland china", "prc", "中国", "中国大陆", "大陆", "内地"],
    "Hong Kong": ["hong kong", "hongkong", "hk", "香港"],
    "Taiwan": ["taiwan", "台湾"],
    "South Korea": ["south korea", "korea", "republic of korea", "韩国", "南韩"],
    "Singapore": ["singapore", "新加坡"],
    "Thailand": ["thailand", "泰国"],
    "India": ["india", "印度"],
    "Australia": ["australia", "澳大利亚", "澳洲"],
    "New Zealand": ["new zealand", "nz", "新西兰"],
    "Germany": ["germany", "deutschland", "德国"],
    "France": ["france", "法国"],
    "Italy": ["italy", "italia", "意大利"],
    "Spain": ["spain", "españa", "espana", "西班牙"],
    "Portugal": ["portugal", "葡萄牙"],
    "Netherlands": ["netherlands", "the netherlands", "holland", "荷兰"],
    "Switzerland": ["switzerland", "swiss", "瑞士"],
}

_COUNTRY_LOOKUP = {alias: name for name, aliases in _COUNTRY_ALIASES.items() for alias in aliases}

_PLUG_SHAPES = {
    "A": "two flat parallel pins",
    "B": "two flat parallel pins plus a round earth pin",
    "C": "two round pins (Europlug)",
    "D": "three large round pins in a triangle",
    "E": "two round pins with a socket earth pin",
    "F": "two round pins with side earth clips (Schuko)",
    "G": "three rectangular pins, fused plug",
    "I": "two flat pins in a V shape, optional flat earth pin",
    "J": "three round pins (Swiss)",
    "L": "three round pins in a row (Italian)",
    "M": "three large round pins (South African style)",
    "N": "three round pins (Brazilian)",
    "O": "three round pins (Thai)",
}

# country -> (plug types, voltage, frequency)
_PLUGS: dict[str, tuple[list[str], str, str]] = {
    "United Kingdom": (["G"], "230 V", "50 Hz"),
    "Ireland": (["G"], "230 V", "50 Hz"),
    "United States": (["A", "B"], "120 V", "60 Hz"),
    "Canada": (["A", "B"], "120 V", "60 Hz"),
    "Mexico": (["A", "B"], "127 V", "60 Hz"),
    "Brazil": (["C", "N"], "127 V / 220 V (varies by city)", "60 Hz"),
    "Japan": (["A", "B"], "100 V", "50 Hz east / 60 Hz west"),
    "China": (["A", "C", "I"], "220 V", "50 Hz"),
    "Hong Kong": (["G"], "220 V", "50 Hz"),
    "Taiwan": (["A", "B"], "110 V", "60 Hz"),
    "South Korea": (["C", "F"], "220 V", "60 Hz"),
    "Singapore": (["G"], "230 V", "50 Hz"),
    "Thailand": (["A", "B", "C", "O"], "230 V", "50 Hz"),
    "India": (["C", "D", "M"], "230 V", "50 Hz"),
    "Australia": (["I"], "230 V", "50 Hz"),
    "New Zealand": (["I"], "230 V", "50 Hz"),
    "Germany": (["C", "F"], "230 V", "50 Hz"),
    "France": (["C", "E"], "230 V", "50 Hz"),
    "Italy": (["C", "F", "L"], "230 V", "50 Hz"),
    "Spain": (["C", "F"], "230 V", "50 Hz"),
    "Portugal": (["C", "F"], "230 V", "50 Hz"),
    "Netherlands": (["C", "F"], "230 V", "50 Hz"),
    "Switzerland": (["C", "J"], "230 V", "50 Hz"),
}

_ROAD_ALIASES: dict[str, list[str]] = {
    "urban": ["urban", "town", "towns", "in town", "city", "city streets", "built-up",
              "built-up area", "residential", "市区", "城市", "城区", "市内", "城镇", "镇上",
              "市区道路", "城市道路"],
    "rural": ["rural", "rural road", "country", "country road", "countryside", "open road",
              "single carriageway", "乡村", "乡下", "乡间", "郊区", "郊外", "乡村公路",
              "乡下公路", "普通公路", "国道", "省道"],
    "motorway": ["motorway", "motorways", "highway", "highways", "freeway", "expressway",
                 "interstate", "autobahn", "autoroute", "autostrada", "autopista", "autovia",
                 "autovía", "高速", "高速公路", "高速路"],
}

_ROAD_LOOKUP = {alias: road for road, aliases in _ROAD_ALIASES.items() for alias in aliases}

# country -> {road: (limit or None, unit)}, typical default limits for cars
_SPEED: dict[str, dict[str, tuple[int | None, str]]] = {
    "United Kingdom": {"urban": (30, "mph"), "rural": (60, "mph"), "motorway": (70, "mph")},
    "United States": {"urban": (25, "mph"), "rural": (55, "mph"), "motorway": (70, "mph")},
    "Ireland": {"urban": (50, "km/h"), "rural": (80, "km/h"), "motorway": (120, "km/h")},
    "France": {"urban": (50, "km/h"), "rural": (80, "km/h"), "motorway": (130, "km/h")},
    "Germany": {"urban": (50, "km/h"), "rural": (100, "km/h"), "motorway": (None, "km/h")},
    "Italy": {"urban": (50, "km/h"), "rural": (90, "km/h"), "motorway": (130, "km/h")},
    "Spain": {"urban": (50, "km/h"), "rural": (90, "km/h"), "motorway": (120, "km/h")},
    "Portugal": {"urban": (50, "km/h"), "rural": (90, "km/h"), "motorway": (120, "km/h")},
    "Netherlands": {"urban": (50, "km/h"), "rural": (80, "km/h"), "motorway": (100, "km/h")},
    "Switzerland": {"urban": (50, "km/h"), "rural": (80, "km/h"), "motorway": (120, "km/h")},
    "Japan": {"urban": (60, "km/h"), "rural": (60, "km/h"), "motorway": (100, "km/h")},
    "China": {"urban": (50, "km/h"), "rural": (70, "km/h"), "motorway": (120, "km/h")},
    "South Korea": {"urban": (50, "km/h"), "rural": (80, "km/h"), "motorway": (100, "km/h")},
    "Australia": {"urban": (50, "km/h"), "rural": (100, "km/h"), "motorway": (110, "km/h")},
    "New Zealand": {"urban": (50, "km/h"), "rural": (100, "km/h"), "motorway": (100, "km/h")},
    "Canada": {"urban": (50, "km/h"), "rural": (80, "km/h"), "motorway": (100, "km/h")},
}

_SPEED_NOTES = {
    ("Germany", "motorway"): "No general limit on much of the Autobahn; 130 km/h is the advisory speed "
                             "and signed limits apply.",
    ("France", "motorway"): "110 km/h in rain.",
    ("United States", "urban"): "Set by each state; 25 mph is a common residential default.",
    ("United States", "rural"): "Set by each state; 55 mph is a common default.",
    ("United States", "motorway"): "Set by each state; interstates range from 55 to 85 mph.",
    ("Netherlands", "motorway"): "Up to 130 km/h between 19:00 and 06:00 where signed.",
    ("Japan", "urban"): "60 km/h is the default; many city streets are signed 40 or 50 km/h.",
}


def _norm(text: str) -> str:
    return " ".join(text.strip().lower().split())


def _country(country: str) -> str:
    key = _norm(country)
    if key.startswith("the "):
        key = key[4:]
    name = _COUNTRY_LOOKUP.get(key)
    if name is None:
        raise ToolError("bad_input", f"Unknown country or region: {country!r}.")
    return name


@tool()
def plug_info(country: str) -> dict:
    """Look up the power plug types, mains voltage and frequency used in a country.

    Args:
        country: Country or region, in English or Chinese, for example "Japan" / "日本",
            "United Kingdom" / "英国", "Australia" / "澳大利亚", "Thailand" / "泰国",
            "Switzerland" / "瑞士", "China" / "中国", "United States" / "美国".
    """
    name = _country(country)
    if name not in _PLUGS:
        raise ToolError("bad_input", f"No plug data for {name}.")
    types, voltage, frequency = _PLUGS[name]
    return {
        "country": name,
        "plug_types": [{"type": t, "shape": _PLUG_SHAPES[t]} for t in types],
        "voltage": voltage,
        "frequency": frequency,
    }


@tool()
def speed_limit(country: str, road: str = "motorway") -> dict:
    """Get the usual default speed limit for cars on a type of road in a country.

    Args:
        country: Country, in English or Chinese, for example "France" / "法国",
            "Germany" / "德国", "Italy" / "意大利", "New Zealand" / "新西兰",
            "United Kingdom" / "英国".
        road: Type of road: "urban" (town / city, 市区 / 城市), "rural" (country road,
            乡村 / 国道) or "motorway" (highway / freeway, 高速公路). Defaults to "motorway".
    """
    name = _country(country)
    if name not in _SPEED:
        raise ToolError("bad_input", f"No speed limit data for {name}.")
    road_key = _ROAD_LOOKUP.get(_norm(road))
    if road_key is None:
        raise ToolError("bad_input", f"Unknown road type: {road!r}. Use urban, rural or motorway.")
    value, unit = _SPEED[name][road_key]
    if value is None:
        kmh = mph = None
    elif unit == "mph":
        mph, kmh = value, round(value * 1.609344)
    else:
        kmh, mph = value, round(value / 1.609344)
    result = {
        "country": name,
        "road": road_key,
        "limit_kmh": kmh,
        "limit_mph": mph,
        "signed_in": unit,
    }
    note = _SPEED_NOTES.get((name, road_key))
    if note:
        result["note"] = note
    result["caution"] = "Typical default for cars; posted signs always take priority."
    return result
