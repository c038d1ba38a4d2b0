"""Choosing tools by the values a message holds: a value shaped like the example a parameter's
description gives points to the tools that take that parameter.

A todo's id is described 'The id, e.g. "todo-002"', a parcel's tracking number 'e.g.
"SF1403827765"': a message holding "todo-001" or "YT5590017724" names something one of those
tools takes, whatever its other words. Only examples that are identifiers count, letters and
digits together ("todo-002", "SF1403827765", "2024-01-15T14:30:25"), never a word ("work",
"Beijing") or a number alone ("2"): those are in every kind of message. A shape is the value with
each letter read as a letter and each digit as a digit, case aside: "todo-002" and "TODO-117"
have one shape, "todo-2" another.

Nothing here is a word of any tool: the shapes are read from the tools' own parameter
descriptions, so a user's or an MCP server's tool is served like a built-in one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache

from repl.embedded.grammar import QUOTED_VALUE
from repl.embedded.router import MeaningRouter
from repl.embedded.words import followed, named_tools
from repl.loop.routing import Router, RouteRequest
from repl.providers.base import ToolChoice
from tools.registry import ToolSchema

# an identifier as it stands in a message: letters, digits and the signs inside ids, ASCII only
# (so "查下YT5590017724这个件" holds YT5590017724)
_VALUE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_:./-]{0,38}[A-Za-z0-9])?")
_MIN_CHARS = 5  # shorter identifiers ("A4", "mp3", "5G") are words of every kind of message


def shape(value: str) -> str | None:
    """The shape of an identifier ("todo-002": "aaaa-999"); None for what is none: a word, a
    number, or anything shorter than five characters."""
    if len(value) < _MIN_CHARS or not re.search(r"[A-Za-z]", value) or not re.search(r"\d", value):
        return None
    return re.sub(r"\d", "9", re.sub(r"[A-Za-z]", "a", value))


@lru_cache(maxsize=256)
def _example_shapes(description: str) -> frozenset[str]:
    found = (next(group for group in m.groups() if group is not None) for m in QUOTED_VALUE.finditer(description))
    return frozenset(s for value in found if (s := shape(value)) is not None)


def shapes_taken(tool: ToolSchema) -> frozenset[str]:
    """The shapes of the identifiers a tool's parameter descriptions give as examples."""
    properties = (tool.get("parameters") or {}).get("properties") or {}
    return frozenset().union(*(_example_shapes(spec["description"]) for spec in properties.values()
                               if isinstance(spec, dict) and isinstance(spec.get("description"), str)))


def shaped(question: str, tools: Sequence[ToolSchema]) -> tuple[str, tuple[str, ...]]:
    """(the first value of ``question`` shaped like an example of some tool's parameter, the
    names of the tools that take it); ("", ()) when it holds none."""
    for found in _VALUE.finditer(question):
        if (value_shape := shape(found.group(0))) is None:
            continue
        names = tuple(t["name"] for t in tools if value_shape in shapes_taken(t))
        if names:
            return found.group(0), names
    return "", ()


class Shaped:
    """A router (``loop.routing.Router``): a message holding a value shaped like a parameter's
    example requires a call to one of the tools that take it, whatever its other words (a todo's
    id beside a file's word asks for no file). Of those tools, the ones the message's words point
    to, if any (``words``: a todo's id said with "done" is one to complete), else all of them, in
    the order of the meaning of the message without the value (``MeaningRouter.ranked``). A message that names a tool, a
    follow-up, or one without such a value is left to the next router (None)."""

    def __init__(self, meaning: MeaningRouter, words: Router) -> None:
        self.meaning, self.words = meaning, words

    def choose(self, request: RouteRequest) -> ToolChoice | None:
        value, names = shaped(request.question, request.tools)
        if not names or named_tools(request.question, request.tools) or followed(request):
            return None
        worded = self.words.choose(request)
        said = tuple(name for name in names if worded is not None and name in worded.allowed)
        choice = ToolChoice("required", said or names, by=f"value {value}")
        if len(choice.allowed) < 2:
            return choice
        # ranked by what the message says to do, without the value: it says which item, and it
        # drew a message towards the examples that hold an id ("todo-002: all wrapped up" to get_todo)
        return self.meaning.ranked(replace(request, question=request.question.replace(value, " ")), choice)
