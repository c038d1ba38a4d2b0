"""A GBNF grammar of the replies the text tool-call protocol accepts, from the tools' schemas.

Sent with each request to the embedded llama.cpp server (``grammar`` in the body), it
constrains decoding so that a reply is either

- tool calls, each ``{"name": <a tool's name>, "arguments": <that tool's schema>}`` with no
  extra keys, written the ways the model writes them: bare objects, a fenced ```json block,
  or ``<tool_call>`` blocks (one to four calls, one per line); or
- plain text in which ``TextCallFilter`` can find no call: no ``{`` followed by ``"`` or
  ``}``, no ``<tool_call>``, and it starts with neither ``{``, ``<`` nor a fence other
  than a code block (```python: not json, json5, jsonc, tool_call, tool_code).

So every call the filter takes from a reply is schema-valid, as far as the converter
goes: it ignores numeric bounds, and a tool whose schema it cannot express (a remote
``$ref``) gets calls with any object as arguments (the registry still checks them).
The rules for the arguments come from llama-cpp-python's JSON-schema converter
(``llama_cpp/llama_grammar.py``, pure Python on the standard library). It is loaded
from its file alone (``_converter_module``): importing it as ``llama_cpp.llama_grammar``
runs the package's ``__init__``, which loads the llama.cpp library, numpy and jinja2, 0.2 to
0.4 s of every ``ask`` and of the REPL's first turn, spent in a client that never runs the
model. Building the grammar of glassloop's 14 tools takes a few milliseconds more; it is
cached per tool list.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from repl.embedded.named import shared_named
from tools.days import days_said, is_span
from tools.registry import ToolSchema

OptionalProps = Literal["all", "no-default", "none", "mentioned"]

# Whitespace inside calls: none, one space, or a newline and an indent (the model's fenced
# blocks are pretty-printed); bounded so that it cannot loop on blanks.
_SPACE = 'space ::= | " " | "\\n" [ \\t]{0,20}'
# JSON string characters: no raw control characters (strict JSON decoders refuse them).
_CHAR = r'char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'
_ANSWER = r"""
answer ::= answer-start answer-piece*
answer-start ::= [^{<`\x00-\x20] | answer-brace | answer-code
answer-code ::= "```" ([a-ik-su-zA-Z0-9+#-] | "j" [^s\n] | "t" [^o\n])
answer-piece ::= [^{<] | answer-brace | "<" [^t{<]
answer-brace ::= "{" [ \t\r\n]{0,8} [^"{} \t\r\n<]
"""
# A reply to a request without tools (the loop's final answer): text only, so the model
# cannot echo a call as its answer.
ANSWER_GRAMMAR = "root ::= answer\n" + _ANSWER.lstrip()
# The answer after tool results: prose from its first character (no "{", "[", "<", a fence
# or a blank to begin with; braces further on stay). Asked which todos were open, the 0.5B
# model answered with one of them as an object ("{\n  id: todo-002, ...").
PROSE_GRAMMAR = r"root ::= [^{[<`\x00-\x20] answer-piece*" + "\n" + _ANSWER.lstrip()
# ... to a question in Chinese that no tool answers (chat, general knowledge): it begins in
# Chinese. Under a chat prompt in English the 0.5B model answered a Chinese remark about the weekend in English.
PROSE_ZH_GRAMMAR = r"root ::= [\u3001-\u303f\u3400-\u9fff\uff01-\uff5e] answer-piece*" + "\n" + _ANSWER.lstrip()
# Chinese characters and punctuation, full-width forms: what an answer to a question without
# any Chinese leaves out (without_han)
_HAN_RANGES = r"\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef"
_ROOT = "root ::= calls | fenced | tagged | answer"
_FRAME = _ROOT + r"""
calls ::= call ("\n" call ("\n" call ("\n" call)?)?)?
fenced ::= "```json\n" calls "\n```"
tagged ::= tag-call ("\n" tag-call ("\n" tag-call ("\n" tag-call)?)?)?
tag-call ::= "<tool_call>\n" call "\n</tool_call>"
"""
_DROP = ("description", "default", "title", "examples", "$comment")


def led_answer(lead: str, not_then: str = "") -> str:
    """The answer grammar with the reply's first words fixed to ``lead`` (then prose); with
    ``not_then``, the prose after the lead may not begin with those words (``ECHO_START``
    characters of them): asked again after an echo that followed the lead, the 0.5B model wrote
    "根据工具结果，" and the question once more, while an answer may well begin with the
    question's first word ("根据工具结果，深圳今天有小雨" to "深圳今天…吗？")."""
    head = f"root ::= {json.dumps(lead, ensure_ascii=False)} "
    banned = not_then.lstrip()[:ECHO_START]
    if not banned:
        return f"{head}answer-piece answer-piece*\n" + _ANSWER.lstrip()
    ways = [f"{json.dumps(banned[:i], ensure_ascii=False) + ' ' if i else ''}[^{_class_char(char)}{{<]"
            for i, char in enumerate(banned)]
    return f"{head}answer-after answer-piece*\nanswer-after ::= {' | '.join(ways)}\n" + _ANSWER.lstrip()


ECHO_START = 4  # characters of an echo the answer asked again may not begin with, after its lead


# The rest of a reply whose start the request writes (``Dialect.reply_start``): llama.cpp
# decodes the words a grammar forces one token at a time, 40-50 ms each on two cores, while a
# prompt's tokens are evaluated together, 10-16 ms each.
_AFTER_LEAD = "answer-piece answer-piece*"
# ... and of a call whose close the client writes once the server ends the reply: the grammar
# stops after the arguments, so the 5 tokens of '}\n</tool_call>' are not decoded either
_AFTER_CALL_START = "root ::= call-0-arguments"
CALL_END = "}\n</tool_call>"


def call_start(name: str) -> str:
    """How a call to tool ``name`` begins, up to its arguments, in the form Qwen2.5 writes."""
    return f'<tool_call>\n{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": '


def after_lead(grammar: str, lead: str) -> tuple[str, str] | None:
    """When ``grammar`` is ``led_answer(lead)``: the start the request writes and the grammar of
    the rest (``split_start``); else None."""
    root, _, rest = grammar.partition("\n")
    head = f"root ::= {json.dumps(lead, ensure_ascii=False)} "
    after = root.removeprefix(head)
    if not root.startswith(head) or after not in (_AFTER_LEAD, "answer-after answer-piece*"):
        return None
    return split_start(lead, f"root ::= {after}", rest)


def after_call_start(grammar: str, name: str) -> tuple[str, str, str] | None:
    """When ``grammar`` is that of exactly one call to the one tool ``name`` (``tool_grammar``
    without ``text`` or ``several``): the start the request writes, ``call_start(name)``, the
    grammar of the arguments (``split_start``) and the end the client writes after them,
    ``CALL_END``; else None."""
    root, _, rest = grammar.partition("\n")
    lines = rest.splitlines()
    if (root != "root ::= tag-call" or "call ::= call-0" not in lines
            or f"call-0-name ::= {json.dumps(json.dumps(name))} space" not in lines
            or not any(line.startswith("call-0-arguments ::= ") for line in lines)):
        return None
    return (*split_start(call_start(name), _AFTER_CALL_START, rest), CALL_END)


def split_start(start: str, root: str, rules: str) -> tuple[str, str]:
    """``start`` without its trailing spaces, and the grammar of the rest: ``root`` after those
    spaces, then ``rules``. Tokens carry the space before a word (" three", ' {"'): a prompt ending
    in a space token would have the model go on from a split it never wrote."""
    trimmed = start.rstrip(" ")
    gap = start[len(trimmed):]
    if gap:
        root = root.replace("root ::= ", f"root ::= {json.dumps(gap)} ", 1)
    return trimmed, f"{root}\n{rules}"


def tool_grammar(tools: list[ToolSchema], *, optional: OptionalProps = "no-default",
                 question: str = "", text: bool = True, several: bool = True) -> str:
    """The GBNF grammar of a reply to a request offering ``tools`` (``{"name",
    "parameters"}`` as the registry lists them). Which of the properties a tool does not
    require its calls may hold: ``all``, those without a ``default`` (``no-default``),
    ``none``, or those ``question`` mentions (``mentioned``, see ``mentioned``).
    ``no-default``: with ``all`` the 0.5B model filled in defaults and invented text (a
    ``detail`` for every new todo, ``offset``/``limit``, a ``glob``); with ``none``
    ``update_todo`` could change nothing. ``mentioned`` keeps what the user gave ("high
    priority") and leaves out what they did not (a due date, a tag): docs/LOCAL_MODEL.md.
    Without ``text`` the reply is calls only, in ``<tool_call>`` blocks, the form Qwen2.5 was
    trained on (a step routed to some tools must call one; the other forms, bare or fenced
    objects, came with more invented arguments on the development cases), and without
    ``several`` exactly one of them."""
    described = [_described(tool) for tool in tools]
    if optional == "mentioned":
        days = [day for day in days_said(question) if not is_span(day)]
        # the values said are read from the tools as written: a description's quoted values, not
        # the choices ``_described`` makes of them
        described = [_ends_apart(_mentioned_only(tool, question, days, _said_values(plain, question)))
                     for plain, tool in zip(tools, described, strict=True)]
        optional = "all"
    tools = described
    grammar = _cached(json.dumps(tools), optional)  # key order kept: it is the order of the properties
    if text:
        return grammar
    return grammar.replace(_ROOT, "root ::= tagged" if several else "root ::= tag-call", 1)


_WORD = re.compile(r"[a-z][a-z']+|[0-9]+")
_HAN_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
# words of a description that say nothing about what a user gives
_STOP = frozenset("""the and for with this that from into only when what which like more than each
 their them they your have will does can may also not its it's one any all use used using given gives
 user users e.g eg default optional preferably such item items text value values how why who where
 there here about some just want need said say says wrote write""".split())


# What a description says a string property takes, when its schema does not (``described_choices``)
QUOTED_VALUE = re.compile(r"""'([^'\s]{1,40})'|"([^"\s]{1,40})"|`([^`\s]{1,40})`""")
# a description that says one of these gives examples of an open set of values, not its choices
_EXAMPLE_MARK = re.compile(r"\be\.?\s?g\b|\bsuch as\b|\bfor (?:example|instance)\b|\blike\b|例如|比如|譬如",
                           re.IGNORECASE)
_CODE = re.compile(r"\bcodes?\b|代码|代号", re.IGNORECASE)
_LETTER_CODE = re.compile(r"[A-Z]{2,4}")


def described_choices(schema: Any) -> dict[str, Any]:
    """What the description of a string property without ``enum``, ``pattern`` or ``format``
    says its value is, as a constraint a grammar keeps ({} when it says nothing so definite):

    - the values it quotes, two or more, when it gives no example ("list local branches
      ('local'), remote ones ('remote') or all ('all')"): ``{"enum": [...]}``. A description
      with "e.g.", "such as", "like", 例如 gives examples of an open set ('"today", "tomorrow"
      or a date like "2025-05-01"'), not its choices;
    - a code whose examples are all capital letters of one length ("a code like "USD""):
      ``{"pattern": "^[A-Z]{3}$"}``. The 0.5B model passed "美元" and "dollars" to a tool that
      takes currency codes; a property that takes a name too ("a name or a code, e.g. "Japan"
      or "JP"") has no such shape."""
    if not isinstance(schema, dict) or any(key in schema for key in ("enum", "pattern", "format", "const")):
        return {}
    types = schema.get("type")
    if "string" not in (types if isinstance(types, list) else [types]):
        return {}
    description = str(schema.get("description") or "")
    quoted = list(dict.fromkeys(next(group for group in found.groups() if group is not None)
                                for found in QUOTED_VALUE.finditer(description)))
    if len(quoted) >= 2 and not _EXAMPLE_MARK.search(description):
        return {"enum": quoted}
    shapes = {len(value) if _LETTER_CODE.fullmatch(value) else 0 for value in quoted}
    if _CODE.search(description) and len(shapes) == 1 and (size := shapes.pop()):
        return {"pattern": f"^[A-Z]{{{size}}}$"}
    return {}


def _described(tool: ToolSchema) -> ToolSchema:
    """``tool`` with each string property's described choices or shape made part of its schema."""
    parameters = tool.get("parameters")
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    if not isinstance(properties, dict):
        return tool
    found = {name: {**sub, **extra} for name, sub in properties.items() if (extra := described_choices(sub))}
    if not found:
        return tool
    return {**tool, "parameters": {**parameters, "properties": {**properties, **found}}}


def not_beginning_with(grammar: str, char: str) -> str:
    """``grammar`` with its prose unable to begin with ``char`` (either case): the first
    character class of the answer's start or of a small-talk reply leaves it out."""
    banned = "".join(sorted({char, char.lower(), char.upper()}))
    out = []
    for line in grammar.split("\n"):
        if line.startswith(("answer-start ::= [^", "root ::= [^")):
            end = line.index("]", line.index("[^") + 2)
            line = line[:end] + "".join(map(_class_char, banned)) + line[end:]
        elif match := re.match(r"root ::= \[((?:\\u[0-9a-f]{4}-\\u[0-9a-f]{4})+)\]", line):
            # ranges of Han: the one holding ``char`` becomes the two either side of it
            pairs = [(int(a, 16), int(b, 16)) for a, b in re.findall(r"\\u([0-9a-f]{4})-\\u([0-9a-f]{4})", match[1])]
            split = [(a, b) for low, high in pairs
                     for a, b in (((low, ord(char) - 1), (ord(char) + 1, high)) if low <= ord(char) <= high
                                  else ((low, high),)) if a <= b]
            ranges = "".join(f"{_class_char(chr(a))}-{_class_char(chr(b))}" for a, b in split)
            line = f"root ::= [{ranges}]" + line[match.end():]
        out.append(line)
    return "\n".join(out)


def _class_char(char: str) -> str:
    return f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}"


def without_han(grammar: str) -> str:
    """``grammar`` with its prose (the answer's rules, a small-talk reply) free of Chinese
    characters: the reply to a question that has none. A call's arguments are left alone."""
    lines = [line.replace("[^", "[^" + _HAN_RANGES) if line.startswith(("answer", "root ::= [^")) else line
             for line in grammar.split("\n")]
    return "\n".join(lines)


def _said_values(tool: ToolSchema, question: str) -> dict[str, list[str]]:
    parameters = tool.get("parameters")
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    return shared_named(list(properties.items()), question) if isinstance(properties, dict) else {}


def _mentioned_only(tool: ToolSchema, question: str, days: list[str],
                    named: dict[str, list[str]] | None = None) -> ToolSchema:
    """``tool`` with only the optional top-level properties ``question`` mentions, and those
    whose value it says required to hold that value:

    - a property for a day (``_for_a_day``) only as one of ``days``, those the question says
      (``days_said``, word for word, with the time said with the day: "tomorrow at 3pm",
      "明天上午十点"; a span such as "next week" names no day), or not at all when it says none:
      "提醒我周五前…" got due "2026-12-05", a Saturday, from the 0.5B model. The tool turns the
      words into a date. When it is the tool's only such property, a call must give it.
    - a string property whose description gives values, one of which the question says
      (``named``, from ``named.shared_named``: "山地车" of 'e.g. "road", …, "山地车"', "Tokyo" for
      an IANA zone), must be given that value: the 0.5B model passed "roadcar" and "UTC" for them.
    - a property with choices (``enum``) whose value the question says (``said_value``: "high
      priority", "make it urgent", "优先级放低点") must be given that value: offered the
      priority, the 0.5B model left it at its default for "…, high priority".
    - a superlative ranks, it does not choose (``_SUPERLATIVE``): "the highest-priority one",
      "the most urgent", "优先级最高的" ask which of the items comes first, so the words in one
      neither say a choice nor offer its property. Offered the priority for a question asking for the open
      todos and the highest-priority one explained, the 0.5B model listed the high ones only;
      "most urgent" would have listed the urgent ones only, none when there are none."""
    parameters = tool["parameters"]
    if not isinstance(properties := parameters.get("properties"), dict):
        return tool
    required = set(parameters.get("required") or ())
    unranked = _SUPERLATIVE.sub(" ", question)
    day_properties = [name for name, sub in properties.items() if name not in required and _for_a_day(sub)]
    named = {name: values for name, values in (named or {}).items() if name not in day_properties}
    kept, given = {}, []
    for name, sub in properties.items():
        if name in day_properties:
            if days:
                kept[name] = {"description": sub.get("description", ""), "enum": days}
                given += [name] * (len(day_properties) == 1)
        elif name in named:
            kept[name] = {"description": sub.get("description", ""), "enum": named[name]}
            given += [name] * (name not in required)
        elif name in required:
            kept[name] = sub
        elif (value := said_value(name, sub, unranked)) is not None:
            kept[name] = {"description": sub.get("description", ""), "enum": [value]}
            given.append(name)
        elif mentioned(name, sub, unranked if _choices(sub) else question):
            kept[name] = sub
    return {**tool, "parameters": {**parameters, "properties": kept,
                                   "required": [*(parameters.get("required") or ()), *given]}}


def _ends_apart(tool: ToolSchema) -> ToolSchema:
    """``tool`` whose two properties must hold the same two values said (a conversion's source
    and target zones, "3pm in Paris is when in Singapore?") with each value in one of them: its
    arguments either way round, never one value twice. Given both ends for each, the 0.5B model
    passed Singapore as source and target."""
    parameters = tool["parameters"]
    properties = parameters.get("properties")
    if not isinstance(properties, dict):
        return tool
    pairs = [name for name, sub in properties.items()
             if isinstance(sub, dict) and len(sub.get("enum") or ()) == 2 and not sub.get("type")]
    ends = [name for name in pairs if properties[name]["enum"] == properties[pairs[0]]["enum"]]
    if len(ends) != 2 or len(pairs) != 2:
        return tool
    first, second = properties[ends[0]]["enum"]

    def way(a: str, b: str) -> dict[str, Any]:
        return {**parameters, "properties": {**properties, ends[0]: {**properties[ends[0]], "enum": [a]},
                                             ends[1]: {**properties[ends[1]], "enum": [b]}}}

    return {**tool, "parameters": {"anyOf": [way(first, second), way(second, first)]}}


def _choices(schema: Any) -> list[str]:
    """The string values an ``enum`` of ``schema`` allows, also under ``anyOf``/``oneOf`` (an
    optional choice: the values or null)."""
    if not isinstance(schema, dict):
        return []
    found = [value for value in schema.get("enum") or () if isinstance(value, str) and value]
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or ():
            found += _choices(option)
    return list(dict.fromkeys(found))


# a description's words for a choice: 'high = 高, 重要, urgent' or '"todo" = not finished yet,
# still open' (up to the next ";" or ")"); the words are split at commas, colons and "or"
_GLOSS = r'(?:^|[\s(;"\'])"?{value}"?\s*[=:]\s*([^;)]*)'
_GLOSS_SPLIT = re.compile(r"\s*(?:[,，、:：]|\bor\b)\s*")
_NOT_EN = re.compile(r"\b(?:not|no|never|isn't|aren't|don't|doesn't|haven't|hasn't|didn't|won't)\b(?:\W+\w+){0,2}\W*$")
# a superlative and the word it ranks by ("highest-priority", "most urgent"; 最高, 最重要 but not
# the adverbs 最近 "lately", 最后 "in the end", 最终, 最初, 最好 "had better")
_SUPERLATIVE = re.compile(r"\b(?:most|least|highest|lowest|biggest|greatest)\b(?:[\s-]+[a-z]+)?"
                          r"|最(?![近后终初好])[\u3400-\u9fff]{1,2}", re.IGNORECASE)
_NOT_ZH = re.compile(r"[不没未别无][太那么很怎样用着]{0,2}$")


def said_value(name: str, schema: Any, question: str) -> str | None:
    """The one value of the choices (``enum``) of property ``name`` that ``question`` says, or
    None. A value is said by a word its description gives for it ("high = 高, 重要, urgent"),
    not negated ("不重要", "not urgent"); the value itself or a single Chinese character of its
    words counts only when the question also names the property (a word of its name, or the
    Chinese of its description outside the values' words): "low priority", "优先级高" say it,
    "buy a high chair" does not."""
    choices = _choices(schema)
    if not choices:
        return None
    description = str(schema.get("description") or "")
    words = {_stem(w) for w in _WORD.findall(question.casefold())}
    names = {_stem(w) for w in _WORD.findall(name.casefold().replace("_", " ")) if len(w) >= 3}
    outside = re.sub(r"\([^)]*\)", "", description)
    named = bool(names & words) or any(run in question for run in _HAN_RUN.findall(outside) if len(run) > 1)
    said = []
    for value in choices:
        gloss = re.search(_GLOSS.format(value=re.escape(value)), description)
        glossed = [w for w in _GLOSS_SPLIT.split(gloss[1].strip()) if w] if gloss else []
        weak = [value] + [w for w in glossed if len(w) == 1 and _HAN_RUN.fullmatch(w)]
        strong = [w for w in glossed if w not in weak]
        if any(_says(question, w) for w in strong) or (named and any(_says(question, w) for w in weak)):
            said.append(value)
    return said[0] if len(said) == 1 else None


def _says(question: str, words: str) -> bool:
    """``question`` holds ``words`` (whole English words, any Chinese) with no negation just
    before them."""
    if _HAN_RUN.match(words):
        return any(not _NOT_ZH.search(question[:m.start()]) for m in re.finditer(re.escape(words), question))
    pattern = r"\b" + r"\s+".join(map(re.escape, words.casefold().split())) + r"\b"
    return any(not _NOT_EN.search(question.casefold()[:m.start()])
               for m in re.finditer(pattern, question.casefold()))


# what a description says of a property for a day ("The day it is due", "New due date", 日期)
# a number in a question: digits, a number word, a Chinese numeral ("一" only before another
# numeral or a measure word: not "一共", "一下", "一起"; nor 一天, 一年: "熊猫一天吃多少竹子" is no
# sum); not "one" ("the highest-priority one", "which one"). A numeric argument is offered only
# for a question that holds one (``mentioned``).
NUMBER = re.compile(r"\d|\b(two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|"
                    r"fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|billion|dozen|half|twice|"
                    r"double|triple)s?\b|[二三四五六七八九十百千万亿两半零〇]|一[十百千万亿个箱件瓶本张斤块]")
_A_DAY = re.compile(r"\b(?:day|date|due|deadline)\b|日期|哪天|截止", re.IGNORECASE)


def _for_a_day(schema: Any) -> bool:
    """A string property whose description says it is a day and names days ("The day it is
    due: today, Friday, 明天"): what a question gives for it is one of the days it says. (A
    search text "e.g. meetings today" names a day but is none.)"""
    if not isinstance(schema, dict) or "enum" in schema or "pattern" in schema or "format" in schema:
        return False
    types = schema.get("type")
    description = str(schema.get("description") or "")
    return ("string" in (types if isinstance(types, list) else [types]) and bool(_A_DAY.search(description))
            and bool(days_said(description)))


def mentioned(name: str, schema: Any, question: str) -> bool:
    """Whether ``question`` gives a value for the property ``name``: it holds a word of the
    property's name or description (English words of three letters or more; Chinese: a run
    of Han characters of the description or two of them in a row), one of its ``enum``
    values, or, for a number, any number. What the description says is what counts, in any
    language: a tool's author describes ``tag`` as "a label, e.g. work; 标签" and a question
    naming a label may set it. (A property for a day is offered by the days a question says,
    ``_mentioned_only``.)"""
    said = question.casefold()
    words = {_stem(w) for w in _WORD.findall(said)}
    schema = schema if isinstance(schema, dict) else {}
    description = str(schema.get("description") or "").casefold()
    keys = {_stem(w) for w in _WORD.findall(name.casefold().replace("_", " ") + " " + description)
            if len(w) >= 3 and w not in _STOP}
    if keys & words:
        return True
    for run in _HAN_RUN.findall(description):
        if run in said or any(run[i:i + 2] in said for i in range(len(run) - 1)):
            return True
    for value in schema.get("enum") or ():
        if isinstance(value, str) and value and _stem(value.casefold()) in words:
            return True
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    return bool({"integer", "number"} & set(types)) and bool(NUMBER.search(said))


def _stem(word: str) -> str:
    """``tags`` and ``tag``, ``files`` and ``file`` alike."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


@lru_cache(maxsize=1)
def _converter_module() -> ModuleType:
    """llama-cpp-python's ``llama_grammar`` module, loaded from its file without running the
    ``llama_cpp`` package (the module imports the standard library only; a test pins that)."""
    import importlib.util

    package = importlib.util.find_spec("llama_cpp")
    if package is None or not package.submodule_search_locations:
        raise ModuleNotFoundError("llama_cpp is not installed", name="llama_cpp")
    path = Path(next(iter(package.submodule_search_locations))) / "llama_grammar.py"
    spec = importlib.util.spec_from_file_location("glassloop_llama_grammar", path)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"cannot load {path}", name="llama_cpp.llama_grammar")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@lru_cache(maxsize=32)
def _cached(tools_json: str, optional: OptionalProps) -> str:
    SchemaConverter = _converter_module().SchemaConverter  # noqa: N806 - the library's class

    class Converter(SchemaConverter):  # type: ignore[misc,valid-type]
        def _generate_constant_rule(self, value: Any) -> str:
            # the converter's constants (enum values, the tool's name) take no trailing
            # whitespace, unlike its strings and numbers: the model's pretty-printed
            # `"status": "todo"\n  }` would be refused
            return f"{super()._generate_constant_rule(value)} space"

    converter = Converter(prop_order={"name": 0, "arguments": 1}, allow_fetch=False,
                                dotall=False, raw_pattern=False)
    alternatives = []
    for number, tool in enumerate(json.loads(tools_json)):
        try:
            schema = converter.resolve_refs(_call_schema(tool, optional), tool["name"])
            alternatives.append(converter.visit(schema, f"call-{number}"))
        except Exception:  # a remote $ref, a keyword the converter asserts on: any object
            loose = _call_schema({"name": tool["name"], "parameters": {"type": "object"}}, "all")
            alternatives.append(converter.visit(loose, f"call-{number}-any"))
    rules = [line for line in converter.format_grammar().splitlines()
             if not line.startswith(("space ::=", "char ::="))]
    return "\n".join([_FRAME.strip(), _ANSWER.strip(), f"call ::= {' | '.join(alternatives)}", *rules,
                      _SPACE, _CHAR]) + "\n"


def _call_schema(tool: dict[str, Any], optional: OptionalProps) -> dict[str, Any]:
    parameters = tool.get("parameters") or {"type": "object", "properties": {}}
    return {"type": "object", "required": ["name", "arguments"],
            "properties": {"name": {"const": tool["name"]},
                           "arguments": _convertible(parameters, optional, top=True)}}


def _convertible(schema: Any, optional: OptionalProps, top: bool = False) -> Any:
    """``schema`` in the form the converter reads right: no prose; an ``enum`` without the
    ``type`` list it would otherwise take instead; objects without extra keys unless the
    schema allows them; the top level's optional properties as ``optional`` says."""
    if isinstance(schema, list):
        return [_convertible(item, optional) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _convertible(value, optional) for key, value in schema.items()
           if key not in _DROP and key != "properties"}
    if "enum" in out or "const" in out:
        out.pop("type", None)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        required = set(schema.get("required") or ())
        out["properties"] = {name: _convertible(sub, optional) for name, sub in properties.items()
                             if not top or name in required or optional == "all"
                             or (optional == "no-default" and not (isinstance(sub, dict) and "default" in sub))}
        out.setdefault("additionalProperties", False)
    elif schema.get("type") == "object" and "additionalProperties" not in schema:
        out["additionalProperties"] = True  # a bare "object": any keys
    return out
