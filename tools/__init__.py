"""Local tools the model can call, and the registry that runs them safely.

The package imports nothing until a tool is built: ``tools.compat`` (standard library only)
is on the REPL's start path, and importing it imports this first."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.registry import Tool


def build_tools(
    *,
    todos_path: Path,
    notes_path: Path,
    files_root: Path,
    weather: str = "open-meteo",
    weather_urls: dict | None = None,
) -> list[Tool]:
    """Every local tool. ``weather_urls`` may hold geocode_url, forecast_url, timeout_s."""
    from tools.calculator import make_calculator_tool
    from tools.files import make_file_tools
    from tools.notes import make_note_tools
    from tools.todos import make_todo_tools
    from tools.weather import make_weather_tool

    return [
        *make_todo_tools(todos_path),
        *make_note_tools(notes_path),
        make_calculator_tool(),
        make_weather_tool(weather, **(weather_urls or {})),
        *make_file_tools(files_root),
    ]
