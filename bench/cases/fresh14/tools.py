from __future__ import annotations

import re

from glassloop_tools import ToolError, tool

# Traditional (modern Western list) birthstones by month.
_BIRTHSTONES: list[dict] = [
    {"month": "January", "month_zh": "一月", "stone": "Garnet", "stone_zh": "石榴石",
     "colour": "deep red", "alternatives": []},
    {"month": "February", "month_zh": "二月", "stone": "Amethyst", "stone_zh": "紫水晶",
     "colour": "purple", "alternatives": []},
    {"month": "March", "month_zh": "三月", "stone": "Aquamarine", "stone_zh": "海蓝宝",
     "colour": "pale blue", "alternatives": ["Bloodstone"]},
    {"month": "April", "month_zh": "四月", "stone": "Diamond", "stone_zh": "钻石",
     "colour": "clear", "alternatives": []},
    {"month": "May", "month_zh": "五月", "stone": "Emerald", "stone_zh": "祖母绿",
     "colour": "green", "alternatives": []},
    {"month": "June", "month_zh": "六月", "stone": "Pearl", "stone_zh": "珍珠",
     "colour": "cream white", "alternatives": ["Alexandrite", "Moonstone"]},
    {"month": "July", "month_zh": "七月", "stone": "Ruby", "stone_zh": "红宝石",
     "colour": "red", "alternatives": []},
    {"month": "August", "month_zh": "八月", "stone": "Peridot", "stone_zh": "橄榄石",
     "colour": "light green", "alternatives": ["Spinel", "Sardonyx"]},
    {"month": "September", "month_zh": "九月", "stone": "Sapphire", "stone_zh": "蓝宝石",
     "colour": "blue", "alternatives": []},
    {"month": "October", "month_zh": "十月", "stone": "Opal", "stone_zh": "欧泊",
     "colour": "multicoloured", "alternatives": ["Tourmaline"]},
    {"month": "November", "month_zh": "十一月", "stone": "Topaz", "stone_zh": "托帕石",
     "colour": "golden yellow", "alternatives": ["Citrine"]},
    {"month": "December", "month_zh": "十二月", "stone": "Turquoise", "stone_zh": "绿松石",
     "colour": "sky blue", "alternatives": ["Tanzanite", "Zircon"]},
]

_ZH_NUMERALS = ["一", "二", "三", "四", "五", "六", "七", "八", "九", "十", "十一", "十二"]


def _month_aliases() -> dict[str, int]:
    aliases: dict[str, int] = {}
    for i, row in enumerate(_BIRTHSTONES):
        n = i + 1
        name = row["month"].lower()
        for alias in (name, name[:3], str(n), f"{n:02d}", row["month_zh"],
                      f"{n}月", f"{_ZH_NUMERALS[i]}月份", f"{n}月份"):
            aliases[alias] = i
    aliases["sept"] = 8
    return aliases


_MONTHS = _month_aliases()


@tool()
def birthstone(month: str) -> dict:
    """Look up the traditional birthstone for a birth month, with its colour and alternatives.

    Args:
        month: The birth month as a name, abbreviation or number, in English or Chinese,
            e.g. "October", "oct", "10", "十月", "10月".
    """
    key = re.sub(r"\s+", "", (month or "").strip().lower()).rstrip(".")
    if key not in _MONTHS:
        raise ToolError("bad_input", f"unknown month: {month!r}; use a month name or 1-12")
    row = _BIRTHSTONES[_MONTHS[key]]
    return {
        "month": row["month"],
        "month_zh": row["month_zh"],
        "stone": row["stone"],
        "stone_zh": row["stone_zh"],
        "colour": row["colour"],
        "alternatives": list(row["alternatives"]),
    }


# Standard paper sizes, width x height in millimetres (portrait).
_PAPER: dict[str, tuple[str, float, float]] = {
    "a0": ("A0", 841, 1189),
    "a1": ("A1", 594, 841),
    "a2": ("A2", 420, 594),
    "a3": ("A3", 297, 420),
    "a4": ("A4", 210, 297),
    "a5": ("A5", 148, 210),
    "a6": ("A6", 105, 148),
    "b4": ("B4 (ISO)", 250, 353),
    "b5": ("B5 (ISO)", 176, 250),
    "c5": ("C5 envelope", 162, 229),
    "dl": ("DL envelope", 110, 220),
    "letter": ("US Letter", 215.9, 279.4),
    "legal": ("US Legal", 215.9, 355.6),
    "tabloid": ("Tabloid / Ledger", 279.4, 431.8),
    "executive": ("Executive", 184.2, 266.7),
    "16k": ("16K (China)", 195, 270),
}

_PAPER_ALIASES: dict[str, str] = {
    "usletter": "letter", "信纸": "letter", "美式信纸": "letter", "letter纸": "letter",
    "uslegal": "legal", "法律纸": "legal", "legal纸": "legal",
    "ledger": "tabloid", "小报": "tabloid", "11x17": "tabloid",
    "行政纸": "executive",
    "16开": "16k", "十六开": "16k",
    "dl信封": "dl", "c5信封": "c5",
}

_UNITS: dict[str, tuple[str, float]] = {
    "mm": ("mm", 1.0), "毫米": ("mm", 1.0),
    "cm": ("cm", 10.0), "厘米": ("cm", 10.0),
    "in": ("in", 25.4), "inch": ("in", 25.4), "inches": ("in", 25.4), "英寸": ("in", 25.4),
}


@tool()
def paper_size(name: str, unit: str = "mm") -> dict:
    """Give the width and height of a standard paper or envelope size.

    Args:
        name: The paper size, in English or Chinese, e.g. "A4", "A3", "B5", "Letter",
            "Legal", "Tabloid", "16开", "信纸".
        unit: Unit for the result: "mm", "cm" or "in" (also "毫米", "厘米", "英寸").
    """
    key = re.sub(r"[\s_\-]+", "", (name or "").strip().lower())
    for suffix in ("paper", "size", "纸张", "纸", "尺寸"):
        if key.endswith(suffix) and key[: -len(suffix)] in _PAPER:
            key = key[: -len(suffix)]
            break
    key = _PAPER_ALIASES.get(key, key)
    if key not in _PAPER:
        raise ToolError("bad_input", f"unknown paper size: {name!r}")
    unit_key = (unit or "mm").strip().lower()
    if unit_key not in _UNITS:
        raise ToolError("bad_input", f"unknown unit: {unit!r}; use mm, cm or in")
    label, per_unit = _UNITS[unit_key]
    full_name, w, h = _PAPER[key]
    return {
        "name": full_name,
        "width": round(w / per_unit, 2),
        "height": round(h / per_unit, 2),
        "unit": label,
        "width_mm": w,
        "height_mm": h,
    }
