"""The third held-out set's own tools: a houseplant care sheet and a rubbish-sorting table.

Both are fixed tables (no network, no clock), so a call gives the same result every run.
"""

from __future__ import annotations

from typing import NamedTuple

from glassloop_tools import ToolError, tool


class Plant(NamedTuple):
    names: tuple[str, ...]  # the common English name first, then other names
    water: str
    light: str
    min_temp_c: int
    pet_safe: bool
    tip: str


_PLANTS: tuple[Plant, ...] = (
    Plant(("Pothos", "绿萝", "devil's ivy", "epipremnum"), "every 7 days, when the top 2 cm is dry",
          "bright indirect; copes with low light", 15, False, "yellow leaves usually mean too much water"),
    Plant(("Snake plant", "虎皮兰", "虎尾兰", "sansevieria", "mother-in-law's tongue"),
          "every 14-21 days; monthly in winter", "low to bright indirect", 10, False,
          "rots easily: let the soil dry out completely"),
    Plant(("Monstera", "龟背竹", "swiss cheese plant"), "every 7-10 days", "bright indirect", 15, False,
          "wipe the big leaves now and then so they can breathe"),
    Plant(("Spider plant", "吊兰", "chlorophytum"), "every 7 days", "bright indirect", 10, True,
          "brown tips come from fluoride in tap water"),
    Plant(("Echeveria (succulent)", "多肉", "石莲花", "succulent"), "every 10-14 days, soak then dry",
          "full sun, at least 4 hours", 5, True, "leggy growth means it wants more light"),
    Plant(("Peace lily", "白掌", "白鹤芋", "spathiphyllum"), "every 5-7 days; it droops when thirsty",
          "low to medium indirect", 16, False, "fine in a shady bathroom"),
    Plant(("Money tree", "发财树", "pachira"), "every 10-14 days", "bright indirect", 12, True,
          "do not move it around: it drops leaves when moved"),
    Plant(("Aloe vera", "芦荟", "aloe"), "every 14-21 days", "bright, some direct sun", 10, False,
          "use a pot with a drainage hole"),
    Plant(("Jasmine", "茉莉", "茉莉花", "jasminum sambac"), "every 3-5 days in summer", "full sun", 10, True,
          "flowers best after a light trim in spring"),
    Plant(("Cactus", "仙人掌", "cacti"), "every 3-4 weeks; almost none in winter", "full sun", 5, True,
          "a cool dry winter helps it flower"),
    Plant(("Lucky bamboo", "富贵竹", "dracaena sanderiana"), "grown in water: change it every 7 days",
          "low to medium indirect", 16, False, "use filtered or rested tap water"),
    Plant(("Clivia", "君子兰", "kaffir lily"), "every 10-14 days", "bright indirect", 10, False,
          "keep it cool and dry for 6 weeks in winter to get flowers"),
    Plant(("Asparagus fern", "文竹", "asparagus setaceus"), "every 3-5 days, keep slightly moist",
          "bright indirect, no midday sun", 10, False, "likes humid air: mist it in dry rooms"),
)


def _matches(needle: str, names: tuple[str, ...]) -> bool:
    return any(needle in name.casefold() or name.casefold() in needle for name in names)


@tool
def plant_care(plant: str) -> dict:
    """Look up how to look after a houseplant: watering, light, cold limit and pet safety.

    Knows about thirteen common houseplants, by English or Chinese name.

    Args:
        plant: the plant's common name, in English or Chinese, e.g. "pothos" or "绿萝"
    """
    needle = plant.strip().casefold()
    if not needle:
        raise ToolError("invalid_plant", "plant is empty: give a plant's name")
    found = [p for p in _PLANTS if _matches(needle, p.names)]
    if not found:
        known = ", ".join(f"{p.names[0]} ({p.names[1]})" for p in _PLANTS)
        raise ToolError("unknown_plant", f"no care sheet for {plant!r}: known are {known}")
    return {"query": plant, "count": len(found), "plants": [
        {"name": " / ".join(p.names[:2]), "water": p.water, "light": p.light,
         "min_temp_c": p.min_temp_c, "safe_for_cats_and_dogs": p.pet_safe, "tip": p.tip}
        for p in found]}


_BINS: dict[str, str] = {
    "recyclable": "recyclable (可回收物, blue bin)",
    "kitchen": "kitchen / wet waste (湿垃圾 or 厨余垃圾, brown bin)",
    "hazardous": "hazardous (有害垃圾, red bin)",
    "residual": "residual / dry waste (干垃圾 or 其他垃圾, black or grey bin)",
}

_ITEMS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("rechargeable battery", "button battery", "battery", "batteries", "充电电池", "纽扣电池", "电池"),
     "hazardous", "plain alkaline AA/AAA cells go in residual in many cities"),
    (("expired medicine", "medicine", "pills", "过期药品", "过期药", "药品", "药"), "hazardous",
     "keep it in its packaging"),
    (("fluorescent tube", "energy-saving bulb", "灯管", "节能灯"), "hazardous", "do not break it"),
    (("paint", "paint tin", "油漆", "油漆桶"), "hazardous", "close the lid tightly"),
    (("greasy pizza box", "pizza box", "披萨盒"), "residual",
     "a clean lid with no grease can go in recyclable"),
    (("milk tea cup", "bubble tea cup", "coffee cup", "奶茶杯", "咖啡杯"), "residual",
     "pour the drink away and put pearls or leftovers in kitchen waste first"),
    (("broken glass", "wine glass", "glass bottle", "glass", "碎玻璃", "玻璃瓶", "玻璃"), "recyclable",
     "wrap broken pieces so nobody gets cut"),
    (("plastic bottle", "drink bottle", "塑料瓶", "饮料瓶"), "recyclable", "empty it and squash it"),
    (("cardboard", "newspaper", "paper box", "纸箱", "报纸", "快递盒"), "recyclable",
     "flatten boxes and remove the tape"),
    (("fruit peel", "banana peel", "果皮", "香蕉皮"), "kitchen", "no plastic bag in the kitchen bin"),
    (("leftovers", "leftover food", "剩饭", "剩菜", "剩饭剩菜"), "kitchen", "drain the liquid first"),
    (("eggshell", "eggshells", "蛋壳", "鸡蛋壳"), "kitchen", ""),
    (("big bone", "pork bone", "大骨头", "猪骨"), "residual", "small fish or chicken bones go in kitchen"),
    (("used tissue", "tissue", "napkin", "纸巾", "餐巾纸", "卫生纸"), "residual",
     "wet paper cannot be recycled"),
    (("old clothes", "clothes", "shoes", "旧衣服", "衣服", "旧鞋"), "recyclable",
     "clean items can also go in a clothing bank"),
)


@tool
def waste_bin(item: str) -> dict:
    """Tell which household rubbish bin an item goes in under four-bin sorting rules.

    The bins are recyclable, kitchen (wet), hazardous and residual (dry), as used in
    Shanghai and other Chinese cities; fifteen kinds of item are in the table.

    Args:
        item: the thing to throw away, in English or Chinese, e.g. "pizza box" or "电池"
    """
    needle = item.strip().casefold()
    if not needle:
        raise ToolError("invalid_item", "item is empty: say what you want to throw away")
    found = [{"item": names[0], "bin": _BINS[kind], "tip": tip}
             for names, kind, tip in _ITEMS if _matches(needle, names)]
    if not found:
        known = ", ".join(names[0] for names, _, _ in _ITEMS)
        raise ToolError("unknown_item", f"no rule for {item!r}: known items are {known}")
    return {"query": item, "count": len(found), "matches": found}
