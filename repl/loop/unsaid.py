"""Arguments nobody said: a call that passes the example of a tool's own description.

A docstring shows a value ("symbol: the ticker, e.g. AAPL"); a small model asked for
another company's price passed the example instead. For any tool (of glassloop's own, any value
but an identifier), a string argument that stands in its tool's description (or a parameter's) just after an example's cue ("e.g.", "such as",
"例如"...) and nowhere in the conversation (the system prompt, what the user said, the
results so far) was never named by anyone: the call is refused with a result saying so, and
the model may call again with the value asked for or ask the user. A value listed as a
choice ("one of low, medium or high") is no example and passes; so does any value that shares
a part with the conversation (a number, a longer word: "Europe/London" for "London", "2 weeks
ago" for "the last two weeks"), one too short to tell ("NY"), and one in a script the user's
message does not use (a translation: "Beijing" for "北京"). What is refused shares nothing
with anything said: "AAPL" asked about Tesla.
"""

from __future__ import annotations

import json
import re
from typing import Any

from repl.loop.hooks import Hooks, Instead, TurnView
from repl.providers.base import ToolCall
from tools.results import error_result

# how a description introduces an example, in English and Chinese; what follows, up to the end
# of its sentence, is the example
EXAMPLE_CUE = re.compile(r"\b(?:e\.\s?g\.?|eg\.|for example|for instance|such as|example:)|例如|比如|譬如|示例",
                         re.IGNORECASE)
SENTENCE_END = re.compile(r"(?<=[.;!?])\s|[。；！？\n]")
MIN_CHARS = 2  # a shorter value ("a") is found anywhere: never judged
# letters and digits together: an identifier, which a built-in tool's own results give
_IDENTIFIER = re.compile(r"(?=.*[A-Za-z])(?=.*\d)")
HAN = re.compile(r"[\u3400-\u9fff]")
HAN_RUN = re.compile(r"[\u3400-\u9fff]+")
LATIN = re.compile(r"[A-Za-z]")


def examples_of(description: str) -> list[str]:
    """The text after each example's cue in ``description``, to the end of its sentence."""
    found = []
    for cue in EXAMPLE_CUE.finditer(description):
        rest = description[cue.end():]
        found.append(SENTENCE_END.split(rest, maxsplit=1)[0].casefold())
    return found


def _examples(description: str, parameters: dict[str, Any]) -> dict[str, list[str]]:
    """Each parameter's examples: its own description's and the tool's."""
    shared = examples_of(description)
    properties = parameters.get("properties") or {}
    return {name: shared + examples_of(str(spec.get("description") or ""))
            for name, spec in properties.items() if isinstance(spec, dict)}


def _conversation(turn: TurnView) -> str:
    parts = [turn.history.system_prompt.text]
    for message in turn.history.messages:
        content = message.get("content")
        parts.append(content if isinstance(content, str) else json.dumps(content, ensure_ascii=False))
    return "\n".join(parts).casefold()


def _last_user(turn: TurnView) -> str:
    return next((str(m.get("content") or "") for m in reversed(turn.history.messages) if m["role"] == "user"), "")


def said(value: str, conversation: str, asked: str) -> bool:
    """Whether ``value`` (casefolded) may come from the conversation: found whole; or sharing a
    part with it, a number (as a number: "todo-002" for "todo 2"), a word of four letters or
    more ("Europe/London" for "London") or two Chinese characters in a row; or too short to
    tell; or written in a script the question (``asked``) does not use at all, a translation."""
    if value in conversation:
        return True
    numbers = [int(n) for n in re.findall(r"\d+", value)]
    words = [w for w in re.findall(r"[^\W\d_]+", value) if len(w) >= 4 and not HAN.search(w)]
    pairs = [run[i:i + 2] for run in HAN_RUN.findall(value) for i in range(max(1, len(run) - 1))]
    if not (numbers or words or pairs):
        return True
    if (set(numbers) & {int(n) for n in re.findall(r"\d+", conversation)}
            or any(w in conversation for w in [*words, *pairs])):
        return True
    return any(script.search(value) and not script.search(asked) for script in (HAN, LATIN))


class UnsaidExamples(Hooks):
    """Refuses a call whose string argument is its tool's example and no one's words. Of
    glassloop's own tools, not an identifier ("todo-002": its own results give ids): asked about
    Oslo, the 0.5B model passed the weather's example city, "Beijing"."""

    def before_tool_call(self, turn: TurnView, call: ToolCall, side_effects: bool) -> Instead | None:
        tool = turn.registry.get(call.name)
        if tool is None:
            return None
        own = tool.source == "built-in"
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            return None
        if not isinstance(arguments, dict):
            return None
        examples = _examples(tool.description, tool.parameters)
        conversation: str | None = None
        for name, value in arguments.items():
            if not isinstance(value, str) or len(value.strip()) < MIN_CHARS or name not in examples:
                continue
            if own and _IDENTIFIER.search(value):  # glassloop's own ids ("todo-002") come from its results
                continue
            wanted = value.strip().casefold()
            if not any(wanted in example for example in examples[name]):
                continue
            conversation = _conversation(turn) if conversation is None else conversation
            if not said(wanted, conversation, _last_user(turn)):
                return Instead(error_result("unsaid_value", (
                    f"{name}={value!r} is the example in {call.name}'s description, not a value "
                    "from this conversation: call it with the value the user named, or ask them")))
        return None
