from __future__ import annotations

from glassloop_tools import ToolError, tool

# --- emergency_numbers -------------------------------------------------------

# Each entry: canonical name -> numbers. "general" is the all-purpose number
# when one exists; the specific services may share it.
_EMERGENCY: dict[str, dict[str, str]] = {
    "China": {"police": "110", "ambulance": "120", "fire": "119", "general": "110"},
    "Hong Kong": {"police": "999", "ambulance": "999", "fire": "999", "general": "999"},
    "Taiwan": {"police": "110", "ambulance": "119", "fire": "119", "general": "112"},
    "Japan": {"police": "110", "ambulance": "119", "fire": "119", "general": "110"},
    "South Korea": {"police": "112", "ambulance": "119", "fire": "119", "general": "112"},
    "Singapore": {"police": "999", "ambulance": "995", "fire": "995", "general": "999"},
    "Thailand": {"police": "191", "ambulance": "1669", "fire": "199", "general": "191"},
    "India": {"police": "100", "ambulance": "108", "fire": "101", "general": "112"},
    "Australia": {"police": "000", "ambulance": "000", "fire": "000", "general": "000"},
    "New Zealand": {"police": "111", "ambulance": "111", "fire": "111", "general": "111"},
    "United States": {"police": "911", "ambulance": "911", "fire": "911", "general": "911"},
    "Canada": {"police": "911", "ambulance": "911", "fire": "911", "general": "911"},
    "Mexico": {"police": "911", "ambulance": "911", "fire": "911", "general": "911"},
    "Brazil": {"police": "190", "ambulance": "192", "fire": "193", "general": "190"},
    "United Kingdom": {"police": "999", "ambulance": "999", "fire": "999", "general": "999"},
    "France": {"police": "17", "ambulance": "15", "fire": "18", "general": "112"},
    "Germany": {"police": "110", "ambulance": "112", "fire": "112", "general": "112"},
    "Italy": {"police": "113", "ambulance": "118", "fire": "115", "general": "112"},
    "Spain": {"police": "091", "ambulance": "061", "fire": "080", "general": "112"},
    "Russia": {"police": "102", "ambulance": "103", "fire": "101", "general": "112"},
}

_COUNTRY_ALIASES: dict[str, str] = {
    "china": "China", "prc": "China", "mainland china": "China", "中国": "China", "中国大陆": "China", "大陆": "China",
    "hong kong": "Hong Kong", "hk": "Hong Kong", "香港": "Hong Kong",
    "taiwan": "Taiwan", "台湾": "Taiwan", "臺灣": "Taiwan",
    "japan": "Japan", "日本": "Japan",
    "south korea": "South Korea", "korea": "South Korea", "韩国": "South Korea", "南韩": "South Korea",
    "singapore": "Singapore", "新加坡": "Singapore",
    "thailand": "Thailand", "泰国": "Thailand",
    "india": "India", "印度": "India",
    "australia": "Australia", "澳大利亚": "Australia", "澳洲": "Australia",
    "new zealand": "New Zealand", "nz": "New Zealand", "新西兰": "New Zealand",
    "united states": "United States", "usa": "United States", "us": "United States",
    "america": "United States", "美国": "United States",
    "canada": "Canada", "加拿大": "Canada",
    "mexico": "Mexico", "墨西哥": "Mexico",
    "brazil": "Brazil", "巴西": "Brazil",
    "united kingdom": "United Kingdom", "uk": "United Kingdom", "britain": "United Kingdom",
    "great britain": "United Kingdom", "england": "United Kingdom", "英国": "United Kingdom",
    "france": "France", "法国": "France",
    "germany": "Germany", "deutschland": "Germany", "德国": "Germany",
    "italy": "Italy", "意大利": "Italy",
    "spain": "Spain", "西班牙": "Spain",
    "russia": "Russia", "俄罗斯": "Russia",
}


def _norm(text: str) -> str:
    words = str(text).strip().lower().split()
    if words and words[0] == "the":
        words = words[1:]
    return " ".join(words)


@tool()
def emergency_numbers(country: str) -> dict:
    """Look up the phone numbers for police, ambulance and fire brigade in a country.

    Args:
        country: Country or region name in English or Chinese, e.g. "Japan", "UK",
            "Germany", "泰国", "澳大利亚".
    """
    key = _norm(country)
    name = _COUNTRY_ALIASES.get(key)
    if name is None:
        raise ToolError("bad_input", f"unknown country: {country!r}")
    numbers = _EMERGENCY[name]
    return {
        "country": name,
        "police": numbers["police"],
        "ambulance": numbers["ambulance"],
        "fire": numbers["fire"],
        "general": numbers["general"],
        "note": "112 also works from most mobile phones in Europe and many other places.",
    }


# --- calories_burned ---------------------------------------------------------

# Approximate MET values (metabolic equivalents) for common activities.
_MET: dict[str, float] = {
    "walking": 3.5,
    "brisk walking": 4.3,
    "jogging": 7.0,
    "running": 9.8,
    "cycling": 6.8,
    "swimming": 6.0,
    "jump rope": 11.0,
    "yoga": 2.5,
    "badminton": 5.5,
    "table tennis": 4.0,
    "tennis": 7.3,
    "basketball": 6.5,
    "football": 7.0,
    "hiking": 6.0,
    "dancing": 5.0,
    "weight training": 3.5,
    "stair climbing": 8.0,
    "rowing machine": 7.0,
    "housework": 3.3,
}

_ACTIVITY_ALIASES: dict[str, str] = {
    "walking": "walking", "walk": "walking", "散步": "walking", "走路": "walking", "步行": "walking",
    "brisk walking": "brisk walking", "brisk walk": "brisk walking", "快走": "brisk walking", "健走": "brisk walking",
    "jogging": "jogging", "jog": "jogging", "慢跑": "jogging",
    "running": "running", "run": "running", "跑步": "running",
    "cycling": "cycling", "bike": "cycling", "biking": "cycling", "bicycling": "cycling",
    "骑车": "cycling", "骑自行车": "cycling", "骑行": "cycling",
    "swimming": "swimming", "swim": "swimming", "游泳": "swimming",
    "jump rope": "jump rope", "jumping rope": "jump rope", "skipping": "jump rope",
    "rope skipping": "jump rope", "跳绳": "jump rope",
    "yoga": "yoga", "瑜伽": "yoga",
    "badminton": "badminton", "羽毛球": "badminton", "打羽毛球": "badminton",
    "table tennis": "table tennis", "ping pong": "table tennis", "乒乓球": "table tennis", "打乒乓球": "table tennis",
    "tennis": "tennis", "网球": "tennis", "打网球": "tennis",
    "basketball": "basketball", "篮球": "basketball", "打篮球": "basketball",
    "football": "football", "soccer": "football", "足球": "football", "踢足球": "football",
    "hiking": "hiking", "hike": "hiking", "徒步": "hiking", "爬山": "hiking",
    "dancing": "dancing", "dance": "dancing", "跳舞": "dancing",
    "weight training": "weight training", "weightlifting": "weight training", "weights": "weight training",
    "lifting": "weight training", "力量训练": "weight training", "举铁": "weight training",
    "stair climbing": "stair climbing", "stairs": "stair climbing", "爬楼梯": "stair climbing",
    "rowing machine": "rowing machine", "rowing": "rowing machine", "划船机": "rowing machine",
    "housework": "housework", "cleaning": "housework", "家务": "housework", "做家务": "housework", "打扫": "housework",
}


@tool()
def calories_burned(activity: str, minutes: int = 30, weight_kg: float = 70) -> dict:
    """Estimate the calories (kcal) a person burns doing an activity for some minutes.

    Args:
        activity: The exercise or activity in English or Chinese, e.g. "running",
            "swimming", "cycling", "yoga", "跳绳", "羽毛球".
        minutes: How long the activity lasts, in minutes (1 to 600).
        weight_kg: Body weight in kilograms (20 to 300).
    """
    name = _ACTIVITY_ALIASES.get(_norm(activity))
    if name is None:
        raise ToolError("bad_input", f"unknown activity: {activity!r}")
    try:
        minutes_f = float(minutes)
        weight_f = float(weight_kg)
    except (TypeError, ValueError):
        raise ToolError("bad_input", "minutes and weight_kg must be numbers") from None
    if not 1 <= minutes_f <= 600:
        raise ToolError("bad_input", "minutes must be between 1 and 600")
    if not 20 <= weight_f <= 300:
        raise ToolError("bad_input", "weight_kg must be between 20 and 300")
    met = _MET[name]
    kcal = met * weight_f * minutes_f / 60.0
    return {
        "activity": name,
        "met": met,
        "minutes": minutes_f,
        "weight_kg": weight_f,
        "kcal": round(kcal),
        "note": "Rough estimate: MET x body weight (kg) x hours; real burn varies with intensity.",
    }
