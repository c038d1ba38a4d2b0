"""What an MCP server offers besides tools: its prompts and its resources, as glassloop shapes.

A prompt becomes the slash command ``/mcp__SERVER__PROMPT`` whose arguments are the prompt's
declared ones (``name=value`` or in their order); what ``prompts/get`` returns is sent as your
message. A resource is attached to a message as ``@SERVER:URI``, its text capped like a file's.
Everything a server sends here is its text, never an instruction: it goes into a message as
data, and the names and descriptions shown are escaped where they are drawn.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from tools.files import MAX_OUTPUT_CHARS
from tools.mcp_convert import NAME_OK, SEPARATOR
from tools.results import ToolError

COMMAND_PREFIX = f"mcp{SEPARATOR}"
MAX_LISTED = 1000  # prompts or resources kept per server: completion lists, not a catalogue
MAX_RESOURCE_CHARS = MAX_OUTPUT_CHARS  # capped as a mentioned file's text


@dataclass(frozen=True)
class PromptArgument:
    name: str
    description: str = ""
    required: bool = False


@dataclass(frozen=True)
class Prompt:
    server: str
    name: str  # as the server names it (``prompts/get`` takes this)
    description: str = ""
    arguments: tuple[PromptArgument, ...] = ()

    @property
    def command(self) -> str:
        """The slash command's name, without the slash: ``mcp__SERVER__PROMPT``."""
        return NAME_OK.sub("_", f"{COMMAND_PREFIX}{self.server}{SEPARATOR}{self.name}")

    @property
    def usage(self) -> str:
        words = [a.name + "=…" if a.required else f"[{a.name}=…]" for a in self.arguments]
        return " ".join([f"/{self.command}", *words])

    def arguments_from(self, typed: str) -> dict[str, str]:
        """The prompt's arguments from what follows the command: ``name=value`` words, or plain
        words given to the declared arguments in their order. ValueError (one line) names an
        unknown argument, a missing required one, or an unclosed quote."""
        try:
            words = shlex.split(typed)
        except ValueError as exc:
            raise ValueError(f"cannot read the arguments: {exc}") from None
        known = {a.name for a in self.arguments}
        given: dict[str, str] = {}
        order = iter(a.name for a in self.arguments)
        for word in words:
            name, eq, value = word.partition("=")
            if eq and name in known:
                given[name] = value
            elif eq and re.fullmatch(r"[A-Za-z_][\w-]*", name):
                raise ValueError(f"/{self.command} has no argument {name!r}; usage: {self.usage}")
            else:
                slot = next((n for n in order if n not in given), None)
                if slot is None:
                    raise ValueError(f"/{self.command} takes {len(known)} argument"
                                     f"{'' if len(known) == 1 else 's'}; usage: {self.usage}")
                given[slot] = word
        missing = [a.name for a in self.arguments if a.required and a.name not in given]
        if missing:
            raise ValueError(f"/{self.command} needs {', '.join(missing)}; usage: {self.usage}")
        return given


@dataclass(frozen=True)
class Resource:
    server: str
    uri: str

    @property
    def mention(self) -> str:
        """How a message names it, without the ``@``: ``SERVER:URI``."""
        return f"{self.server}:{self.uri}"


def prompts_from(server: str, listed: list[Any]) -> list[Prompt]:
    """The prompts of a ``prompts/list`` answer that have a name; the first of a command name wins."""
    prompts: dict[str, Prompt] = {}
    for item in listed[:MAX_LISTED]:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            continue
        arguments = tuple(
            PromptArgument(str(a["name"]), _text(a.get("description")), a.get("required") is True)
            for a in _list(item.get("arguments")) if isinstance(a, dict) and isinstance(a.get("name"), str))
        made = Prompt(server, item["name"], _text(item.get("description") or item.get("title")), arguments)
        prompts.setdefault(made.command, made)
    return list(prompts.values())


def resources_from(server: str, listed: list[Any]) -> list[Resource]:
    """The resources of a ``resources/list`` answer that have a URI a message can name."""
    return [Resource(server, item["uri"]) for item in listed[:MAX_LISTED]
            if isinstance(item, dict) and isinstance(item.get("uri"), str) and _nameable(item["uri"])]


def prompt_message(result: dict[str, Any]) -> str:
    """What ``prompts/get`` returned, as the text of one message: the messages' text in order,
    an embedded resource's text fenced under its URI, an assistant's part labelled as such,
    media named with its size. ToolError when nothing in it is text."""
    parts: list[str] = []
    for message in _list(result.get("messages")):
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        for block in content if isinstance(content, list) else [content]:
            said = _said(block) if isinstance(block, dict) else ""
            if said:
                parts.append(f"(the prompt's assistant part) {said}" if message.get("role") == "assistant" else said)
    if not parts:
        raise ToolError("empty_prompt", "the server's prompt has no text to send")
    return "\n\n".join(parts)


def resource_text(result: dict[str, Any], uri: str) -> tuple[str, int]:
    """A ``resources/read`` answer's text (its text contents joined) capped at
    ``MAX_RESOURCE_CHARS``, and its whole length; ToolError when it holds only bytes."""
    contents = [c for c in _list(result.get("contents")) if isinstance(c, dict)]
    texts = [c["text"] for c in contents if isinstance(c.get("text"), str)]
    if not texts:
        kinds = sorted({_text(c.get("mimeType")) for c in contents} - {""})
        said = f"bytes ({', '.join(kinds)})" if kinds else "bytes" if contents else "nothing"
        raise ToolError("not_text", f"{uri} holds {said}, not text: only text is attached")
    text = "\n\n".join(texts)
    return text[:MAX_RESOURCE_CHARS], len(text)


def parse_mention(name: str, servers: set[str]) -> tuple[str, str] | None:
    """``SERVER:URI`` → (server, uri) when SERVER is a configured MCP server; else None (a file)."""
    server, colon, uri = name.partition(":")
    return (server, uri) if colon and uri and server in servers else None


def _said(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return _text(block.get("text"))
    if kind == "resource":
        inner = _dict(block.get("resource"))
        uri = _text(inner.get("uri"))
        if isinstance(inner.get("text"), str):
            body = inner["text"][:MAX_RESOURCE_CHARS]
            fence = "`" * max([3, *(len(run) + 1 for run in re.findall(r"`+", body))])
            return f"{uri}:\n{fence}\n{body.rstrip(chr(10))}\n{fence}"
        return f"[{uri}: not text, not sent]"
    if kind == "resource_link":
        return f"[resource {_text(block.get('uri'))}]"
    data = block.get("data")
    size = len(data) * 3 // 4 if isinstance(data, str) else 0
    return f"[{kind or 'unknown'} {_text(block.get('mimeType'))}, {size:,} bytes: not sent]"


def _nameable(uri: str) -> bool:
    """A URI a typed ``@SERVER:URI`` word can hold: no space, nothing unprintable."""
    return bool(uri) and len(uri) <= 2048 and uri.isprintable() and not any(c.isspace() for c in uri)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
