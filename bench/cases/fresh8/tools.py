from __future__ import annotations

from glassloop_tools import ToolError, tool

# ---------------------------------------------------------------------------
# Fabric care: how to wash, dry and iron a fabric.
# ---------------------------------------------------------------------------

_FABRICS: dict[str, dict] = {
    "cotton": {
        "machine_washable": True,
        "max_water_temp_c": 60,
        "detergent": "regular detergent",
        "tumble_dry": "yes, medium heat",
        "iron": "hot (3 dots), slightly damp",
        "tip": "Wash dark cotton inside out to slow fading.",
    },
    "wool": {
        "machine_washable": True,
        "max_water_temp_c": 30,
        "detergent": "wool or mild detergent, no enzymes",
        "tumble_dry": "no, dry flat on a towel",
        "iron": "cool to warm (1-2 dots) with a damp cloth",
        "tip": "Use the wool/hand-wash cycle; hot water and agitation cause felting.",
    },
    "cashmere": {
        "machine_washable": False,
        "max_water_temp_c": 30,
        "detergent": "cashmere or baby shampoo",
        "tumble_dry": "no, dry flat",
        "iron": "cool (1 dot) with steam, or skip",
        "tip": "Hand wash, never wring; roll in a towel to remove water.",
    },
    "silk": {
        "machine_washable": False,
        "max_water_temp_c": 30,
        "detergent": "silk or pH-neutral mild detergent",
        "tumble_dry": "no, hang in shade",
        "iron": "cool (1 dot) on the reverse side",
        "tip": "Hand wash quickly in cold water; keep out of direct sun.",
    },
    "linen": {
        "machine_washable": True,
        "max_water_temp_c": 40,
        "detergent": "mild detergent, no bleach on coloured linen",
        "tumble_dry": "low heat only, remove while damp",
        "iron": "hot (3 dots) while still damp",
        "tip": "Linen softens with each wash; expect some creasing.",
    },
    "denim": {
        "machine_washable": True,
        "max_water_temp_c": 30,
        "detergent": "colour detergent",
        "tumble_dry": "low heat or line dry to avoid shrinking",
        "iron": "medium to hot (2-3 dots) inside out",
        "tip": "Turn jeans inside out and wash rarely to keep the colour.",
    },
    "polyester": {
        "machine_washable": True,
        "max_water_temp_c": 40,
        "detergent": "regular detergent",
        "tumble_dry": "yes, low heat",
        "iron": "cool to warm (1-2 dots)",
        "tip": "Dries fast; high heat can leave shiny marks or melt it.",
    },
}

_FABRIC_ALIASES: dict[str, str] = {
    "cotton": "cotton", "棉": "cotton", "纯棉": "cotton", "全棉": "cotton", "棉布": "cotton",
    "wool": "wool", "woollen": "wool", "woolen": "wool", "merino": "wool",
    "羊毛": "wool", "毛料": "wool", "美利奴": "wool",
    "cashmere": "cashmere", "羊绒": "cashmere", "山羊绒": "cashmere",
    "silk": "silk", "真丝": "silk", "丝绸": "silk", "桑蚕丝": "silk", "丝": "silk",
    "linen": "linen", "flax": "linen", "亚麻": "linen", "麻": "linen", "棉麻": "linen",
    "denim": "denim", "jeans": "denim", "jean": "denim",
    "牛仔": "denim", "牛仔布": "denim", "牛仔裤": "denim",
    "polyester": "polyester", "poly": "polyester",
    "涤纶": "polyester", "聚酯纤维": "polyester", "聚酯": "polyester",
}


@tool()
def fabric_care(fabric: str) -> dict:
    """Look up how to wash, dry and iron clothes made of a given fabric.

    Args:
        fabric: The fabric or material of the garment, in English or Chinese,
            e.g. "cotton", "wool", "cashmere", "silk", "linen", "denim",
            "polyester", "棉", "羊毛", "羊绒", "真丝", "亚麻", "牛仔", "涤纶".
    """
    key = _FABRIC_ALIASES.get(fabric.strip().lower())
    if key is None:
        raise ToolError(
            "bad_input",
            f"unknown fabric {fabric!r}; try cotton, wool, cashmere, silk, linen, denim or polyester",
        )
    return {"fabric": key, **_FABRICS[key]}


# ---------------------------------------------------------------------------
# Pet feeding: how often and how much to feed a pet.
# ---------------------------------------------------------------------------

# (animal, stage) -> meals per day, grams of food per kg of body weight per day, main food
_FEEDING: dict[tuple[str, str], dict] = {
    ("dog", "young"): {"meals_per_day": 3, "grams_per_kg": 40, "main_food": "puppy dry food"},
    ("dog", "adult"): {"meals_per_day": 2, "grams_per_kg": 25, "main_food": "adult dry food"},
    ("dog", "senior"): {"meals_per_day": 2, "grams_per_kg": 20, "main_food": "senior dry food, lower calorie"},
    ("cat", "young"): {"meals_per_day": 4, "grams_per_kg": 30, "main_food": "kitten wet and dry food"},
    ("cat", "adult"): {"meals_per_day": 2, "grams_per_kg": 15, "main_food": "adult cat food, meat based"},
    ("cat", "senior"): {"meals_per_day": 3, "grams_per_kg": 14, "main_food": "senior cat food, more wet food"},
    ("rabbit", "young"): {"meals_per_day": 2, "grams_per_kg": 50, "main_food": "unlimited hay plus alfalfa pellets"},
    ("rabbit", "adult"): {"meals_per_day": 2, "grams_per_kg": 25, "main_food": "unlimited hay, pellets and leafy greens"},
    ("rabbit", "senior"): {"meals_per_day": 2, "grams_per_kg": 25, "main_food": "unlimited hay, soft greens, fewer pellets"},
    ("hamster", "young"): {"meals_per_day": 1, "grams_per_kg": 120, "main_food": "hamster mix with extra protein"},
    ("hamster", "adult"): {"meals_per_day": 1, "grams_per_kg": 100, "main_food": "hamster mix, a little fresh veg"},
    ("hamster", "senior"): {"meals_per_day": 1, "grams_per_kg": 100, "main_food": "softened hamster mix"},
    ("parrot", "young"): {"meals_per_day": 3, "grams_per_kg": 100, "main_food": "hand-feeding formula or soft pellets"},
    ("parrot", "adult"): {"meals_per_day": 2, "grams_per_kg": 80, "main_food": "pellets plus fresh fruit and veg"},
    ("parrot", "senior"): {"meals_per_day": 2, "grams_per_kg": 70, "main_food": "pellets, soft fruit and veg"},
}

_ANIMAL_ALIASES: dict[str, tuple[str, str]] = {
    # alias -> (animal, implied stage or "")
    "dog": ("dog", ""), "dogs": ("dog", ""), "puppy": ("dog", "young"), "pup": ("dog", "young"),
    "狗": ("dog", ""), "狗狗": ("dog", ""), "犬": ("dog", ""), "小狗": ("dog", "young"), "幼犬": ("dog", "young"),
    "cat": ("cat", ""), "cats": ("cat", ""), "kitten": ("cat", "young"), "kitty": ("cat", ""),
    "猫": ("cat", ""), "猫咪": ("cat", ""), "小猫": ("cat", "young"), "幼猫": ("cat", "young"),
    "rabbit": ("rabbit", ""), "bunny": ("rabbit", ""), "兔": ("rabbit", ""), "兔子": ("rabbit", ""),
    "hamster": ("hamster", ""), "仓鼠": ("hamster", ""),
    "parrot": ("parrot", ""), "budgie": ("parrot", ""), "parakeet": ("parrot", ""),
    "鹦鹉": ("parrot", ""), "虎皮鹦鹉": ("parrot", ""),
}

_STAGE_ALIASES: dict[str, str] = {
    "": "", "young": "young", "baby": "young", "junior": "young", "puppy": "young", "kitten": "young",
    "幼年": "young", "幼崽": "young", "小": "young",
    "adult": "adult", "grown": "adult", "成年": "adult", "成年期": "adult",
    "senior": "senior", "old": "senior", "elderly": "senior", "老年": "senior", "老": "senior",
}


@tool()
def pet_feeding(animal: str, stage: str = "", weight_kg: float = 0.0) -> dict:
    """Give a feeding guide for a pet: meals per day, daily amount and main food.

    Args:
        animal: The kind of pet, in English or Chinese, e.g. "dog", "puppy",
            "cat", "kitten", "rabbit", "hamster", "parrot", "狗", "猫", "兔子",
            "仓鼠", "鹦鹉".
        stage: Life stage of the pet, e.g. "young", "adult", "senior", "幼年",
            "成年", "老年". Leave empty for adult (or young for "puppy"/"kitten").
        weight_kg: Body weight of the pet in kilograms, e.g. 4.5 or 0.12; when
            given, the daily amount in grams is worked out. 0 means unknown.
    """
    entry = _ANIMAL_ALIASES.get(animal.strip().lower())
    if entry is None:
        raise ToolError(
            "bad_input",
            f"unknown animal {animal!r}; try dog, cat, rabbit, hamster or parrot",
        )
    kind, implied = entry
    stage_key = _STAGE_ALIASES.get(stage.strip().lower())
    if stage_key is None:
        raise ToolError("bad_input", f"unknown stage {stage!r}; try young, adult or senior")
    stage_key = stage_key or implied or "adult"
    if weight_kg < 0 or weight_kg > 120:
        raise ToolError("bad_input", f"weight_kg {weight_kg} is out of range (0-120)")
    row = _FEEDING[(kind, stage_key)]
    result = {"animal": kind, "stage": stage_key, **row}
    if weight_kg > 0:
        result["weight_kg"] = weight_kg
        result["daily_grams"] = round(weight_kg * row["grams_per_kg"], 1)
    result["note"] = "Always keep fresh water available; adjust for activity and vet advice."
    return result
