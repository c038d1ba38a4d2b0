from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from tools.registry import Registry
from tools.weather import clothing_advice, make_weather_tool

PLACES = {
    "beijing": {"name": "Beijing", "country": "China", "latitude": 39.9, "longitude": 116.4},
    "北京": {"name": "北京", "country": "中国", "latitude": 39.9, "longitude": 116.4},
    "shanghai": {"name": "Shanghai", "country": "China", "latitude": 31.2, "longitude": 121.5},
}
FORECASTS = {  # by latitude: (current temp, daily max, daily min, weather codes)
    "39.9": {"current": (6.5, 0), "days": [(9.0, -1.0, 0), (12.0, 2.0, 3)]},
    "31.2": {"current": (17.0, 61), "days": [(19.0, 14.0, 63), (22.0, 15.0, 2)]},
}


class FakeOpenMeteo(BaseHTTPRequestHandler):
    requests: list[tuple[str, dict]] = []
    mode = "ok"

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: object) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        type(self).requests.append((url.path, query))
        if type(self).mode == "broken":
            return self._send(500, b"<html>oops</html>")
        if type(self).mode == "garbage":
            return self._send(200, {"daily": {"time": []}, "results": [PLACES["beijing"]]})
        if url.path == "/v1/search":
            place = PLACES.get(query["name"].lower())
            return self._send(200, {"results": [place]} if place else {"generationtime_ms": 0.1})
        if "start_date" in query and query["start_date"] < "2000-01-01":
            return self._send(400, {"error": True, "reason": "start_date is out of range"})
        return self._send(200, self._forecast(query))

    def _forecast(self, query: dict) -> dict:
        data = FORECASTS[query["latitude"]]
        days = data["days"][: int(query.get("forecast_days", 1))]
        body = {"daily": {
            "time": [f"2025-05-0{i + 1}" for i in range(len(days))],
            "temperature_2m_max": [d[0] for d in days],
            "temperature_2m_min": [d[1] for d in days],
            "weather_code": [d[2] for d in days],
        }}
        if "current" in query:
            body["current"] = {"temperature_2m": data["current"][0],
                               "weather_code": data["current"][1]}
        return body


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    FakeOpenMeteo.requests = []
    FakeOpenMeteo.mode = "ok"
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenMeteo)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def registry_for(base: str) -> Registry:
    tool = make_weather_tool("open-meteo", geocode_url=f"{base}/v1/search",
                             forecast_url=f"{base}/v1/forecast", timeout_s=2.0)
    return Registry([tool])


def test_beijing_today(server: str) -> None:
    result = registry_for(server).call("get_weather", {"city": "Beijing"})
    assert result["ok"] is True
    assert result["city"] == "Beijing" and result["country"] == "China"
    assert result["temperature_c"] == 6.5 and result["high_c"] == 9.0 and result["low_c"] == -1.0
    assert result["condition"] == "clear sky" and result["source"] == "open-meteo"
    assert "coat" in result["advice"]
    geo, forecast = FakeOpenMeteo.requests
    assert geo == ("/v1/search", {"name": "Beijing", "count": "1", "language": "en"})
    assert forecast[1]["daily"] == "temperature_2m_max,temperature_2m_min,weather_code"
    assert forecast[1]["timezone"] == "auto" and forecast[1]["forecast_days"] == "1"


def test_shanghai_rain_and_chinese_name(server: str) -> None:
    reg = registry_for(server)
    shanghai = reg.call("get_weather", {"city": "Shanghai"})
    assert shanghai["condition"] == "light rain" and "umbrella" in shanghai["advice"]
    beijing = reg.call("get_weather", {"city": "北京"})
    assert beijing["city"] == "北京" and beijing["ok"]
    assert FakeOpenMeteo.requests[-2][1]["language"] == "zh"


def test_tomorrow_and_explicit_date(server: str) -> None:
    reg = registry_for(server)
    tomorrow = reg.call("get_weather", {"city": "Shanghai", "date": "tomorrow"})
    assert tomorrow["date"] == "2025-05-02" and tomorrow["high_c"] == 22.0
    assert tomorrow["temperature_c"] is None and tomorrow["condition"] == "partly cloudy"
    dated = reg.call("get_weather", {"city": "Beijing", "date": "2025-05-01"})
    assert dated["ok"] and FakeOpenMeteo.requests[-1][1]["start_date"] == "2025-05-01"
    refused = reg.call("get_weather", {"city": "Beijing", "date": "1990-01-01"})["error"]
    assert refused["type"] == "invalid_arguments" and "out of range" in refused["message"]
    bad = reg.call("get_weather", {"city": "Beijing", "date": "next week"})["error"]
    assert bad["type"] == "invalid_arguments"


def test_unknown_city(server: str) -> None:
    error = registry_for(server).call("get_weather", {"city": "Atlantis"})["error"]
    assert error["type"] == "not_found" and "Atlantis" in error["message"]


@pytest.mark.parametrize("mode", ["broken", "garbage"])
def test_bad_responses_are_network_errors(server: str, mode: str) -> None:
    FakeOpenMeteo.mode = mode
    result = registry_for(server).call("get_weather", {"city": "Beijing"})
    assert result["ok"] is False and result["error"]["type"] == "network"


def test_unreachable_service() -> None:
    result = registry_for("http://127.0.0.1:9").call("get_weather", {"city": "Beijing"})
    assert result["ok"] is False and result["error"]["type"] == "network"
    assert "temperature_c" not in result


def test_sample_provider() -> None:
    tool = make_weather_tool("sample")
    reg = Registry([tool])
    beijing = reg.call("get_weather", {"city": "北京"})
    assert beijing["city"] == "Beijing" and beijing["source"] == "sample data"
    shanghai = reg.call("get_weather", {"city": "shanghai", "date": "tomorrow"})
    assert shanghai["city"] == "Shanghai" and shanghai["date"] == "tomorrow"
    assert "umbrella" in shanghai["advice"]
    missing = reg.call("get_weather", {"city": "Atlantis"})["error"]
    assert missing["type"] == "not_found" and "Beijing" in missing["message"]
    assert "sample" in tool.description


def test_unknown_provider_and_advice() -> None:
    with pytest.raises(ValueError):
        make_weather_tool("crystal-ball")
    assert "sun" in clothing_advice(33, "clear sky")
    assert "gloves" in clothing_advice(-5, "snow") and "waterproof" in clothing_advice(-5, "snow")
