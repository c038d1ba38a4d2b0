"""Weather for a city: live from Open-Meteo (no key needed), or a small sample table.

Network failures and odd responses become ``ToolError("network", ...)``; the
tool never invents data. The sample provider says so in its ``source``.
"""

from __future__ import annotations

import re
from datetime import date as Date
from typing import TYPE_CHECKING, Any

from tools.cancel import Cancel
from tools.days import day_of
from tools.registry import Tool, tool
from tools.results import ToolError

if TYPE_CHECKING:  # httpx is imported on the first live call: it is start-up cost otherwise
    import httpx

GEOCODE_URL = "https://geocoding-api.open-meteo.com/v1/search"
FORECAST_URL = "https://api.open-meteo.com/v1/forecast"

WMO_CONDITIONS: dict[int, str] = {
    0: "clear sky", 1: "mainly clear", 2: "partly cloudy", 3: "overcast",
    45: "fog", 48: "freezing fog",
    51: "light drizzle", 53: "drizzle", 55: "heavy drizzle",
    56: "freezing drizzle", 57: "heavy freezing drizzle",
    61: "light rain", 63: "rain", 65: "heavy rain", 66: "freezing rain", 67: "heavy freezing rain",
    71: "light snow", 73: "snow", 75: "heavy snow", 77: "snow grains",
    80: "light rain showers", 81: "rain showers", 82: "violent rain showers",
    85: "snow showers", 86: "heavy snow showers",
    95: "thunderstorm", 96: "thunderstorm with hail", 99: "thunderstorm with heavy hail",
}

# Typical values only, for demos and offline use.
SAMPLE: dict[str, dict[str, Any]] = {
    "beijing": {"city": "Beijing", "temperature_c": 18, "high_c": 24, "low_c": 11,
                "condition": "clear sky"},
    "shanghai": {"city": "Shanghai", "temperature_c": 21, "high_c": 24, "low_c": 18,
                 "condition": "light rain"},
    "guangzhou": {"city": "Guangzhou", "temperature_c": 28, "high_c": 31, "low_c": 24,
                  "condition": "thunderstorm"},
    "shenzhen": {"city": "Shenzhen", "temperature_c": 27, "high_c": 30, "low_c": 24,
                 "condition": "partly cloudy"},
    "hangzhou": {"city": "Hangzhou", "temperature_c": 20, "high_c": 23, "low_c": 16,
                 "condition": "overcast"},
    "london": {"city": "London", "temperature_c": 12, "high_c": 14, "low_c": 8,
               "condition": "drizzle"},
    "tokyo": {"city": "Tokyo", "temperature_c": 17, "high_c": 20, "low_c": 13,
              "condition": "mainly clear"},
}
SAMPLE_ALIASES = {"北京": "beijing", "上海": "shanghai", "广州": "guangzhou",
                  "深圳": "shenzhen", "杭州": "hangzhou", "伦敦": "london", "东京": "tokyo"}

_RELATIVE_DAYS = {"": 0, "today": 0, "今天": 0, "tomorrow": 1, "明天": 1, "后天": 2}
MAX_DAYS_AHEAD = 15


def clothing_advice(temperature_c: float | None, condition: str) -> str:
    if temperature_c is None:
        advice = "check the temperature before dressing"
    elif temperature_c >= 28:
        advice = "light, breathable clothes and sun protection"
    elif temperature_c >= 20:
        advice = "a T-shirt or light shirt"
    elif temperature_c >= 12:
        advice = "a light jacket or sweater"
    elif temperature_c >= 3:
        advice = "a warm coat"
    else:
        advice = "a heavy coat, hat and gloves"
    if any(w in condition for w in ("rain", "drizzle", "shower", "thunder")):
        advice += "; take an umbrella"
    elif "snow" in condition:
        advice += "; wear waterproof shoes"
    return advice


def _resolve_date(text: str | None) -> int | str:
    """Days from today (an int), or an explicit ISO date (a str): also a day as people say it,
    "Friday", "下周三", "March 3rd" (``tools.days``; the small model is offered only those)."""
    key = (text or "").strip().lower()
    if key in _RELATIVE_DAYS:
        return _RELATIVE_DAYS[key]
    day = day_of(key, Date.today())
    if day is None:
        raise ToolError(
            "invalid_arguments",
            f"date {text!r} is not understood; use YYYY-MM-DD, 'today', 'tomorrow' or a weekday",
        )
    return day.isoformat()


def _get_json(client: httpx.Client, url: str, params: dict[str, Any]) -> dict[str, Any]:
    import httpx

    try:
        response = client.get(url, params=params)
    except httpx.HTTPError as exc:
        raise ToolError("network", f"weather service unreachable ({type(exc).__name__}: {exc})") from exc
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code == 400 and isinstance(body, dict) and body.get("reason"):
        raise ToolError("invalid_arguments", f"weather service refused: {body['reason']}")
    if response.status_code != 200 or not isinstance(body, dict):
        raise ToolError("network", f"weather service answered HTTP {response.status_code} "
                        "with an unusable body")
    return body


def _geocode(client: httpx.Client, url: str, city: str) -> dict[str, Any]:
    language = "zh" if re.search(r"[\u4e00-\u9fff]", city) else "en"
    body = _get_json(client, url, {"name": city, "count": 1, "language": language})
    results = body.get("results") or []
    if not results:
        raise ToolError("not_found", f"no city called {city!r} was found")
    place = results[0]
    if not isinstance(place, dict) or "latitude" not in place or "longitude" not in place:
        raise ToolError("network", "weather service returned a place without coordinates")
    return place


def _forecast_params(place: dict[str, Any], day: int | str) -> dict:
    params: dict[str, Any] = {
        "latitude": place["latitude"], "longitude": place["longitude"],
        "daily": "temperature_2m_max,temperature_2m_min,weather_code", "timezone": "auto",
    }
    if isinstance(day, str):
        params.update(start_date=day, end_date=day)
    else:
        params["forecast_days"] = day + 1
    if day == 0:
        params["current"] = "temperature_2m,weather_code"
    return params


def _read_forecast(body: dict[str, Any], index: int) -> dict[str, Any]:
    try:
        daily = body["daily"]
        code = int(daily["weather_code"][index])
        result = {
            "date": daily["time"][index],
            "high_c": daily["temperature_2m_max"][index],
            "low_c": daily["temperature_2m_min"][index],
        }
        current = body.get("current") or {}
        if "temperature_2m" in current:
            result["temperature_c"] = current["temperature_2m"]
            code = int(current.get("weather_code", code))
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ToolError("network", f"weather service returned an unexpected forecast ({exc!r})") from exc
    result["condition"] = WMO_CONDITIONS.get(code, f"weather code {code}")
    return result


def _open_meteo(city: str, when: str | None, urls: tuple[str, str], timeout_s: float, cancel: Cancel) -> dict:
    day = _resolve_date(when)
    if isinstance(day, int) and day > MAX_DAYS_AHEAD:
        raise ToolError("invalid_arguments", f"forecasts reach {MAX_DAYS_AHEAD} days ahead")
    import httpx

    with httpx.Client(timeout=timeout_s) as client:
        place = _geocode(client, urls[0], city)
        if cancel.cancelled:  # the call timed out or its turn ended meanwhile: no second request
            raise ToolError("cancelled", "the weather lookup was cancelled before the forecast was asked for")
        body = _get_json(client, urls[1], _forecast_params(place, day))
    forecast = _read_forecast(body, 0 if isinstance(day, str) else day)
    forecast.setdefault("temperature_c", None)
    shown = forecast["temperature_c"] if forecast["temperature_c"] is not None else forecast["high_c"]
    return {
        "city": place.get("name", city), "country": place.get("country"), **forecast,
        "advice": clothing_advice(shown, forecast["condition"]), "source": "open-meteo",
    }


def _sample(city: str, when: str | None) -> dict:
    day = _resolve_date(when)
    key = city.strip().lower()
    entry = SAMPLE.get(SAMPLE_ALIASES.get(city.strip(), key))
    if entry is None:
        known = ", ".join(v["city"] for v in SAMPLE.values())
        raise ToolError("not_found", f"no sample weather for {city!r}; sample cities: {known}")
    shown_date = day if isinstance(day, str) else (when or "today")
    advice = clothing_advice(entry["temperature_c"], entry["condition"])
    return {**entry, "date": shown_date, "advice": advice, "source": "sample data",
            "note": "built-in sample values, not a live forecast"}


def make_weather_tool(
    provider: str = "open-meteo",
    geocode_url: str = GEOCODE_URL,
    forecast_url: str = FORECAST_URL,
    timeout_s: float = 5.0,
) -> Tool:
    """``get_weather`` backed by ``provider`` ("open-meteo" or "sample")."""
    if provider not in ("open-meteo", "sample"):
        raise ValueError(f"unknown weather provider {provider!r}; use 'open-meteo' or 'sample'")

    def get_weather(city: str, date: str | None = None, cancel: Cancel | None = None) -> dict:
        """Get the weather (temperature in °C, condition, clothing advice) for a city.

        Use it whenever the user asks about weather or what to wear outside.

        Args:
            city: City name in any language, e.g. "Beijing" or "北京".
            date: "today" (default), "tomorrow" or a date like "2025-05-01"; 今天, 明天, 后天.
        """
        if not city.strip():
            raise ToolError("invalid_arguments", "city must not be empty")
        if provider == "sample":
            return _sample(city, date)
        return _open_meteo(city, date, (geocode_url, forecast_url), timeout_s, cancel or Cancel())

    description = None
    if provider == "sample":
        description = ("Get sample weather for a few big cities (built-in demo values, "
                       "not a live forecast; say so when answering).")
    return tool(get_weather, examples=("rain in Madrid this Sunday?", "Toronto: how warm is it now", "Madrid forecast", "明天深圳热不热", "周末去北京要穿厚外套吗"), description=description, timeout_s=timeout_s * 2 + 1)
