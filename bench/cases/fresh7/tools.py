"""Two read-only everyday tools: a local bus timetable and first-aid steps."""

from __future__ import annotations

from glassloop_tools import ToolError, tool

# ---------------------------------------------------------------- bus timetable

_STOPS = {
    "central station": {
        "4": ["06:10", "06:40", "07:10", "07:40", "08:10", "09:10", "12:10", "17:10", "18:10"],
        "12": ["06:25", "07:25", "08:25", "10:25", "14:25", "16:25", "18:25"],
        "N1": ["23:30", "00:30", "01:30"],
    },
    "riverside": {
        "12": ["06:38", "07:38", "08:38", "10:38", "14:38", "16:38", "18:38"],
        "27": ["07:05", "08:05", "09:05", "13:05", "17:05"],
    },
    "old market": {
        "4": ["06:18", "06:48", "07:18", "07:48", "08:18", "09:18", "12:18", "17:18", "18:18"],
        "27": ["07:15", "08:15", "09:15", "13:15", "17:15"],
        "N1": ["23:38", "00:38", "01:38"],
    },
    "university": {
        "4": ["06:30", "07:00", "07:30", "08:00", "08:30", "09:30", "12:30", "17:30", "18:30"],
        "27": ["07:28", "08:28", "09:28", "13:28", "17:28"],
    },
    "hospital": {
        "12": ["06:50", "07:50", "08:50", "10:50", "14:50", "16:50", "18:50"],
        "N1": ["23:50", "00:50", "01:50"],
    },
}

_STOP_ALIASES = {
    "central": "central station", "station": "central station", "中央车站": "central station",
    "火车站": "central station", "中央站": "central station",
    "河滨": "riverside", "河边": "riverside",
    "老市场": "old market", "market": "old market",
    "大学": "university", "uni": "university",
    "医院": "hospital",
}


def _find_stop(stop: str) -> str:
    key = " ".join(stop.strip().lower().replace("站", "").split())
    for suffix in (" stop", " bus stop"):
        if key.endswith(suffix):
            key = key[: -len(suffix)].strip()
    if key in _STOPS:
        return key
    if key in _STOP_ALIASES:
        return _STOP_ALIASES[key]
    for name in _STOPS:
        if key and (key in name or name in key):
            return name
    for alias, name in _STOP_ALIASES.items():
        if key and alias in key:
            return name
    raise ToolError("bad_input", f"unknown stop {stop!r}; known stops: "
                    + ", ".join(n.title() for n in _STOPS))


@tool()
def bus_timetable(stop: str, line: str = "") -> dict:
    """Show the scheduled weekday bus departures from a town bus stop, optionally for one line.

    Args:
        stop: name of the bus stop, e.g. Central Station, Riverside, Old Market, University, Hospital
        line: bus line number such as 4, 12, 27 or N1; leave empty for all lines at the stop
    """
    name = _find_stop(stop)
    lines = _STOPS[name]
    if line:
        wanted = line.strip().upper().removeprefix("LINE").strip()
        if wanted not in lines:
            raise ToolError("bad_input", f"line {line!r} does not stop at {name.title()}; "
                            "lines here: " + ", ".join(lines))
        lines = {wanted: lines[wanted]}
    return {
        "stop": name.title(),
        "days": "Monday to Friday",
        "departures": {ln: list(times) for ln, times in lines.items()},
    }


# ---------------------------------------------------------------- first aid

_FIRST_AID = {
    "burn": {
        "steps": ["Cool the burn under cool running water for 20 minutes.",
                  "Remove rings or tight items near the area before it swells.",
                  "Cover loosely with cling film or a clean non-fluffy dressing.",
                  "Do not apply ice, butter or creams, and do not burst blisters."],
        "get_help_if": "larger than the palm, on face/hands/genitals, white or charred skin, or a chemical/electrical burn",
    },
    "cut": {
        "steps": ["Press firmly on the cut with a clean cloth to stop the bleeding.",
                  "Rinse with clean running water once bleeding slows.",
                  "Cover with a plaster or sterile dressing.",
                  "Keep it clean and watch for redness, heat or pus."],
        "get_help_if": "bleeding does not stop after 10 minutes of pressure, the cut is deep or gaping, or dirt is stuck in it",
    },
    "sprain": {
        "steps": ["Rest the joint and avoid putting weight on it.",
                  "Apply an ice pack wrapped in a cloth for 15-20 minutes every 2-3 hours.",
                  "Support it with a compression bandage, not too tight.",
                  "Keep it raised above heart level when possible."],
        "get_help_if": "you cannot bear weight, the joint looks deformed, or there is numbness",
    },
    "nosebleed": {
        "steps": ["Sit up and lean forward, not back.",
                  "Pinch the soft part of the nose just above the nostrils for 10-15 minutes.",
                  "Breathe through the mouth and spit out any blood.",
                  "Avoid blowing the nose or bending down for a few hours."],
        "get_help_if": "bleeding lasts more than 20 minutes, follows a head injury, or is very heavy",
    },
    "bee sting": {
        "steps": ["Scrape the sting out sideways with a fingernail or card; do not squeeze it.",
                  "Wash the area with soap and water.",
                  "Apply a cold pack for 10 minutes to reduce swelling.",
                  "Keep the arm or leg raised if it swells."],
        "get_help_if": "there is difficulty breathing, swelling of the face or throat, dizziness: call emergency services",
    },
    "blister": {
        "steps": ["Leave the blister intact if possible.",
                  "Cover it with a soft plaster or blister pad.",
                  "If it bursts, let the fluid drain, do not peel the skin, and cover it."],
        "get_help_if": "it is very painful, red and hot, or full of yellow or green pus",
    },
    "splinter": {
        "steps": ["Wash your hands and the area.",
                  "Pull the splinter out with clean tweezers at the same angle it went in.",
                  "Squeeze gently to let a little blood wash the wound, then cover it."],
        "get_help_if": "it is deep, under a nail, made of glass, or the area becomes infected",
    },
}

_INJURY_ALIASES = {
    "burned": "burn", "burnt": "burn", "scald": "burn", "烫伤": "burn", "烧伤": "burn", "烫": "burn",
    "cut": "cut", "graze": "cut", "scrape": "cut", "割伤": "cut", "切伤": "cut", "伤口": "cut", "割": "cut",
    "sprained ankle": "sprain", "twisted ankle": "sprain", "扭伤": "sprain", "崴脚": "sprain", "崴": "sprain",
    "nose bleed": "nosebleed", "bloody nose": "nosebleed", "流鼻血": "nosebleed", "鼻血": "nosebleed",
    "sting": "bee sting", "wasp sting": "bee sting", "bee": "bee sting", "蜜蜂": "bee sting",
    "蛰": "bee sting", "蜇": "bee sting",
    "水泡": "blister", "水疱": "blister", "磨脚": "blister",
    "刺": "splinter", "扎刺": "splinter", "木刺": "splinter",
}


@tool()
def first_aid(injury: str) -> dict:
    """Give first-aid steps for a common minor injury such as a burn, cut, sprain, nosebleed, bee sting, blister or splinter.

    Args:
        injury: the kind of injury, e.g. burn, cut, sprain, nosebleed, bee sting, blister, splinter
    """
    key = " ".join(injury.strip().lower().split())
    if not key:
        raise ToolError("bad_input", "say which injury, e.g. burn or sprain")
    name = None
    if key in _FIRST_AID:
        name = key
    elif key in _INJURY_ALIASES:
        name = _INJURY_ALIASES[key]
    else:
        for k in _FIRST_AID:
            if k in key or key.rstrip("s") == k:
                name = k
                break
        if name is None:
            for alias, k in _INJURY_ALIASES.items():
                if alias in key:
                    name = k
                    break
    if name is None:
        raise ToolError("bad_input", f"no first-aid entry for {injury!r}; known: "
                        + ", ".join(_FIRST_AID))
    entry = _FIRST_AID[name]
    return {"injury": name, "steps": list(entry["steps"]),
            "get_help_if": entry["get_help_if"],
            "note": "General guidance only; call emergency services for anything serious."}
