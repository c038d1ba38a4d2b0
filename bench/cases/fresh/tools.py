"""Two small offline tools: a flight status board and a unit converter."""

from glassloop_tools import ToolError, tool

# A frozen departures board; no network involved.
_FLIGHTS = {
    "CA981": {"airline": "Air China", "from": "PEK", "to": "JFK",
              "departs": "13:00", "arrives": "14:10", "gate": "E18",
              "status": "on time"},
    "LH723": {"airline": "Lufthansa", "from": "FRA", "to": "PEK",
              "departs": "17:55", "arrives": "09:40+1", "gate": "Z25",
              "status": "delayed 45 min"},
    "BA38": {"airline": "British Airways", "from": "PEK", "to": "LHR",
             "departs": "11:35", "arrives": "15:50", "gate": "E05",
             "status": "boarding"},
    "UA857": {"airline": "United", "from": "SFO", "to": "PVG",
              "departs": "11:05", "arrives": "15:25+1", "gate": "G94",
              "status": "cancelled"},
    "MU5101": {"airline": "China Eastern", "from": "SHA", "to": "PEK",
               "departs": "08:00", "arrives": "10:15", "gate": "B12",
               "status": "landed"},
}


@tool
def flight_status(flight_number: str) -> dict:
    """Look up today's status, gate and scheduled times of a flight.

    Args:
        flight_number: the airline code followed by the flight's number, spaces allowed
    """
    key = "".join(flight_number.split()).upper()
    if key not in _FLIGHTS:
        raise ToolError("not_found", f"no flight {flight_number!r} on today's board")
    return {"flight": key, **_FLIGHTS[key]}


# factor to the base unit of each kind: metre, kilogram
_LENGTH = {"mm": 0.001, "cm": 0.01, "m": 1.0, "km": 1000.0,
           "in": 0.0254, "ft": 0.3048, "yd": 0.9144, "mi": 1609.344}
_WEIGHT = {"g": 0.001, "kg": 1.0, "t": 1000.0, "oz": 0.028349523125,
           "lb": 0.45359237, "jin": 0.5, "st": 6.35029318}
_TEMPS = {"c", "f", "k"}

_ALIASES = {
    "millimeter": "mm", "millimetre": "mm", "毫米": "mm",
    "centimeter": "cm", "centimetre": "cm", "厘米": "cm", "公分": "cm",
    "meter": "m", "metre": "m", "米": "m",
    "kilometer": "km", "kilometre": "km", "公里": "km", "千米": "km",
    "inch": "in", "inches": "in", "英寸": "in", '"': "in",
    "foot": "ft", "feet": "ft", "英尺": "ft", "'": "ft",
    "yard": "yd", "码": "yd",
    "mile": "mi", "miles": "mi", "英里": "mi",
    "gram": "g", "gramme": "g", "克": "g",
    "kilogram": "kg", "kilo": "kg", "kilos": "kg", "公斤": "kg", "千克": "kg",
    "tonne": "t", "ton": "t", "吨": "t",
    "ounce": "oz", "ounces": "oz", "盎司": "oz",
    "pound": "lb", "pounds": "lb", "lbs": "lb", "磅": "lb",
    "斤": "jin", "stone": "st",
    "celsius": "c", "°c": "c", "摄氏度": "c", "摄氏": "c",
    "fahrenheit": "f", "°f": "f", "华氏度": "f", "华氏": "f",
    "kelvin": "k", "开尔文": "k",
}


def _unit(name: str) -> str:
    u = name.strip().lower()
    u = _ALIASES.get(u, _ALIASES.get(u.rstrip("s"), u))
    if u in _LENGTH or u in _WEIGHT or u in _TEMPS:
        return u
    raise ToolError("not_found", f"unknown unit {name!r}")


def _to_kelvin(v: float, u: str) -> float:
    return {"c": v + 273.15, "f": (v - 32) * 5 / 9 + 273.15, "k": v}[u]


def _from_kelvin(v: float, u: str) -> float:
    return {"c": v - 273.15, "f": (v - 273.15) * 9 / 5 + 32, "k": v}[u]


@tool
def convert_units(value: float, from_unit: str, to_unit: str) -> dict:
    """Convert a length, weight or temperature from one unit to another.

    Args:
        value: the amount to convert
        from_unit: the unit the amount is in, as a symbol or a name
        to_unit: the unit wanted, of the same kind
    """
    a, b = _unit(from_unit), _unit(to_unit)
    for table in (_LENGTH, _WEIGHT):
        if a in table and b in table:
            result = value * table[a] / table[b]
            break
    else:
        if a in _TEMPS and b in _TEMPS:
            result = _from_kelvin(_to_kelvin(value, a), b)
        else:
            raise ToolError("bad_request",
                            f"cannot convert {from_unit!r} to {to_unit!r}: different kinds")
    return {"value": value, "from": a, "to": b, "result": round(result, 4)}
