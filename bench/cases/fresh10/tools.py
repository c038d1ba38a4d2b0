from __future__ import annotations

from glassloop_tools import ToolError, tool

# ---------------------------------------------------------------------------
# Bicycle tyre pressure
# ---------------------------------------------------------------------------

_PSI_TO_BAR = 0.0689476

_BIKES: dict[str, dict] = {
    "road": {
        "label": "road bike",
        "tyre_width_mm": "25-28",
        "psi": {"light": (70, 80), "normal": (80, 90), "heavy": (90, 100)},
        "tip": "Narrow tyres need high pressure to avoid pinch flats; check before every ride.",
    },
    "gravel": {
        "label": "gravel bike",
        "tyre_width_mm": "38-45",
        "psi": {"light": (30, 35), "normal": (35, 42), "heavy": (42, 50)},
        "tip": "Drop 3-5 psi for loose or muddy surfaces.",
    },
    "mountain": {
        "label": "mountain bike",
        "tyre_width_mm": "56-64",
        "psi": {"light": (22, 26), "normal": (26, 30), "heavy": (30, 35)},
        "tip": "Run the rear 2 psi higher than the front; tubeless can go lower.",
    },
    "city": {
        "label": "city / hybrid bike",
        "tyre_width_mm": "35-47",
        "psi": {"light": (45, 55), "normal": (55, 65), "heavy": (65, 70)},
        "tip": "Add 5 psi when carrying panniers or a child seat.",
    },
    "kids": {
        "label": "children's bike",
        "tyre_width_mm": "40-54",
        "psi": {"light": (25, 30), "normal": (30, 35), "heavy": (35, 40)},
        "tip": "Never exceed the maximum printed on the tyre sidewall.",
    },
}

_BIKE_ALIASES: dict[str, str] = {
    "road": "road", "road bike": "road", "racing": "road", "racer": "road",
    "公路": "road", "公路车": "road", "跑车": "road", "公路自行车": "road",
    "gravel": "gravel", "gravel bike": "gravel", "adventure": "gravel",
    "砾石": "gravel", "砾石车": "gravel", "瓜车": "gravel",
    "mountain": "mountain", "mountain bike": "mountain", "mtb": "mountain",
    "山地": "mountain", "山地车": "mountain", "山地自行车": "mountain",
    "city": "city", "city bike": "city", "hybrid": "city", "commuter": "city",
    "commute": "city", "urban": "city", "通勤": "city", "通勤车": "city",
    "城市": "city", "城市车": "city", "城市自行车": "city", "混合": "city",
    "kids": "kids", "kid": "kids", "kids bike": "kids", "child": "kids",
    "children": "kids", "children's bike": "kids", "儿童": "kids",
    "童车": "kids", "儿童车": "kids", "儿童自行车": "kids", "小孩": "kids",
}

_LOAD_ALIASES: dict[str, str] = {
    "light": "light", "lightweight": "light", "low": "light",
    "轻": "light", "较轻": "light", "偏轻": "light",
    "normal": "normal", "average": "normal", "medium": "normal", "standard": "normal",
    "普通": "normal", "正常": "normal", "一般": "normal", "中等": "normal",
    "heavy": "heavy", "loaded": "heavy", "high": "heavy",
    "重": "heavy", "较重": "heavy", "偏重": "heavy", "负重": "heavy",
}


def _norm(value: str) -> str:
    return " ".join(str(value).strip().lower().replace("_", " ").replace("-", " ").split())


@tool()
def bike_tire_pressure(bike_type: str, rider_load: str = "normal") -> dict:
    """Look up the recommended tyre pressure (psi and bar) for a kind of bicycle.

    Args:
        bike_type: Kind of bicycle, e.g. "road", "gravel", "mountain" (or "mtb"),
            "city" (or "hybrid", "commuter"), "kids"; Chinese names such as
            "公路车", "砾石车", "山地车", "通勤车", "童车" also work.
        rider_load: Weight of rider plus luggage: "light", "normal" or "heavy"
            (also "轻", "普通", "重"). Defaults to "normal".
    """
    key = _norm(bike_type)
    bike = _BIKE_ALIASES.get(key) or _BIKE_ALIASES.get(key.removesuffix(" bike"))
    if bike is None:
        raise ToolError(
            "bad_input",
            f"unknown bike type {bike_type!r}; use road, gravel, mountain, city or kids",
        )
    load = _LOAD_ALIASES.get(_norm(rider_load))
    if load is None:
        raise ToolError(
            "bad_input",
            f"unknown rider load {rider_load!r}; use light, normal or heavy",
        )
    entry = _BIKES[bike]
    low, high = entry["psi"][load]
    return {
        "bike_type": bike,
        "label": entry["label"],
        "rider_load": load,
        "typical_tyre_width_mm": entry["tyre_width_mm"],
        "psi_min": low,
        "psi_max": high,
        "bar_min": round(low * _PSI_TO_BAR, 1),
        "bar_max": round(high * _PSI_TO_BAR, 1),
        "tip": entry["tip"],
    }


# ---------------------------------------------------------------------------
# Stretching routines
# ---------------------------------------------------------------------------

_STRETCHES: dict[str, dict] = {
    "neck": {
        "label": "neck",
        "moves": ["chin tuck", "ear-to-shoulder side bend", "slow neck rotation"],
        "caution": "Move slowly and stop if you feel tingling or dizziness.",
    },
    "shoulders": {
        "label": "shoulders",
        "moves": ["cross-body arm pull", "doorway chest opener", "thread the needle"],
        "caution": "Keep the shoulders down away from the ears.",
    },
    "lower_back": {
        "label": "lower back",
        "moves": ["knees-to-chest", "cat-cow", "child's pose", "supine twist"],
        "caution": "Avoid bouncing; see a doctor if pain runs down a leg.",
    },
    "hamstrings": {
        "label": "hamstrings",
        "moves": ["standing toe reach", "seated single-leg reach", "lying strap stretch"],
        "caution": "Hinge at the hips with a long spine rather than rounding the back.",
    },
    "wrists": {
        "label": "wrists and forearms",
        "moves": ["prayer stretch", "reverse prayer", "wrist flexor pull", "fist rolls"],
        "caution": "Gentle pressure only; numb fingers are a sign to stop.",
    },
    "hips": {
        "label": "hips",
        "moves": ["kneeling hip-flexor lunge", "figure-four stretch", "butterfly"],
        "caution": "Keep the pelvis square in the lunge.",
    },
    "calves": {
        "label": "calves",
        "moves": ["wall calf stretch", "bent-knee soleus stretch", "step heel drop"],
        "caution": "Keep the heel on the floor in the wall stretch.",
    },
}

_AREA_ALIASES: dict[str, str] = {
    "neck": "neck", "脖子": "neck", "颈": "neck", "颈部": "neck", "颈椎": "neck",
    "shoulder": "shoulders", "shoulders": "shoulders", "upper back": "shoulders",
    "肩": "shoulders", "肩膀": "shoulders", "肩部": "shoulders", "肩颈": "shoulders",
    "lower back": "lower_back", "back": "lower_back", "low back": "lower_back",
    "lumbar": "lower_back", "腰": "lower_back", "腰部": "lower_back",
    "下背": "lower_back", "下背部": "lower_back", "后腰": "lower_back", "背": "lower_back",
    "hamstring": "hamstrings", "hamstrings": "hamstrings", "back of thigh": "hamstrings",
    "大腿后侧": "hamstrings", "腿后侧": "hamstrings", "腘绳肌": "hamstrings", "大腿后": "hamstrings",
    "wrist": "wrists", "wrists": "wrists", "forearm": "wrists", "forearms": "wrists",
    "手腕": "wrists", "腕": "wrists", "腕部": "wrists", "前臂": "wrists",
    "hip": "hips", "hips": "hips", "glutes": "hips", "hip flexors": "hips",
    "髋": "hips", "髋部": "hips", "臀部": "hips", "胯": "hips",
    "calf": "calves", "calves": "calves", "小腿": "calves", "小腿肚": "calves",
}

_LEVELS: dict[str, dict] = {
    "gentle": {"hold_seconds": 15, "rounds": 2},
    "standard": {"hold_seconds": 30, "rounds": 2},
    "deep": {"hold_seconds": 45, "rounds": 3},
}

_LEVEL_ALIASES: dict[str, str] = {
    "gentle": "gentle", "easy": "gentle", "beginner": "gentle", "light": "gentle",
    "轻柔": "gentle", "简单": "gentle", "入门": "gentle", "轻松": "gentle", "初级": "gentle",
    "standard": "standard", "normal": "standard", "medium": "standard", "regular": "standard",
    "标准": "standard", "普通": "standard", "中等": "standard", "一般": "standard",
    "deep": "deep", "advanced": "deep", "intense": "deep", "hard": "deep",
    "进阶": "deep", "深度": "deep", "高级": "deep", "强": "deep", "高强度": "deep",
}


@tool()
def stretch_routine(body_area: str, level: str = "standard") -> dict:
    """Suggest a short stretching routine for one area of the body.

    Args:
        body_area: Area to stretch, e.g. "neck", "shoulders", "lower back",
            "hamstrings", "wrists", "hips", "calves"; Chinese names such as
            "脖子", "肩膀", "腰", "大腿后侧", "手腕", "髋部", "小腿" also work.
        level: How intense the routine is: "gentle", "standard" or "deep"
            (also "easy", "advanced", "简单", "标准", "进阶"). Defaults to "standard".
    """
    area = _AREA_ALIASES.get(_norm(body_area))
    if area is None:
        raise ToolError(
            "bad_input",
            f"unknown body area {body_area!r}; use neck, shoulders, lower back, hamstrings, wrists, hips or calves",
        )
    lvl = _LEVEL_ALIASES.get(_norm(level))
    if lvl is None:
        raise ToolError(
            "bad_input",
            f"unknown level {level!r}; use gentle, standard or deep",
        )
    entry = _STRETCHES[area]
    spec = _LEVELS[lvl]
    moves = [
        {"name": name, "hold_seconds": spec["hold_seconds"], "rounds": spec["rounds"]}
        for name in entry["moves"]
    ]
    total_seconds = len(moves) * spec["hold_seconds"] * spec["rounds"]
    return {
        "body_area": area,
        "label": entry["label"],
        "level": lvl,
        "stretches": moves,
        "approx_minutes": round(total_seconds / 60, 1),
        "caution": entry["caution"],
    }
