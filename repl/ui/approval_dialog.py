"""The approval dialog: what a side-effecting call will change, and the user's choice.

``ask()`` shows a panel (a before → after preview when the tool gives one,
then the arguments), every value whole, and reads one key: y / n / a / r / e,
and ``v`` when a value taller than the screen is folded (it shows the value
whole, through the pager when it is taller than the screen). ``n`` asks for an
optional reason; ``e`` opens the arguments as editable JSON, validates them
and shows the panel again, its preview made anew from the edited arguments;
``r`` lists the later calls of the step it would approve and asks once more.
A destructive call offers neither ``a`` nor ``r``: it is asked every time. Ctrl-C raises KeyboardInterrupt (the caller denies
the call and cancels the turn). Input and output are injectable for tests.

Keys typed before a question is on screen never answer it: on a terminal the
question appears ``GRACE_S`` after the panel, and everything typed until then
(while the answer streamed, or right after the last message) is discarded,
as sudo does with its password prompt.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.input import Input
from prompt_toolkit.input.typeahead import clear_typeahead
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.output import Output
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.highlighter import JSONHighlighter
from rich.padding import Padding
from rich.panel import Panel
from rich.text import Text

from repl.loop.approval import ApprovalRequest, PendingCall, UserChoice
from repl.loop.events import short_command
from repl.ui.escape import clean, json_display
from repl.ui.event_views import ONE_LINE_ARGS
from repl.ui.pager import show

Validate = Callable[[dict[str, Any]], "str | None"]
ACTIONS = {"y": "yes", "n": "no", "a": "always", "r": "rest"}
CONTEXT_FIELDS = ("title", "name")  # shown unchanged next to a change, so it is clear what changes
EDIT_HINT = "Edit the arguments: Esc-Enter (or Alt-Enter) accepts, Ctrl-C cancels."
GRACE_S = 0.3  # between the panel and its question; keys typed before the question are dropped


class ApprovalDialog:
    def __init__(
        self, console: Console, *, input: Input | None = None, output: Output | None = None
    ) -> None:
        self.console = console
        self._input = input  # injected input (tests) is read as given: nothing is typed ahead
        self._output = output

    def ask(self, request: ApprovalRequest, validate: Validate) -> UserChoice:
        arguments, edited = dict(request.arguments), False
        while True:
            card = approval_panel(request, arguments, edited)
            self.console.print(card)
            hidden = card.hidden(self.console)
            key = self._read_key(_choice_prompt(request, bool(hidden)), _keys(request, bool(hidden)))
            while key == "v":
                self._view(hidden)
                key = self._read_key(_choice_prompt(request, True), _keys(request, True))
            if key == "e":
                new_arguments = self._edit(arguments, validate)
                if new_arguments is not None:
                    arguments, edited = new_arguments, True
                continue
            if key == "r" and not self._confirm_rest(request):
                continue
            reason = self._read_reason() if key == "n" else ""
            return UserChoice(ACTIONS[key], reason, arguments if edited else None)  # type: ignore[arg-type]

    def confirm(self, question: str) -> bool:
        """A yes/no question; Ctrl-C or Ctrl-D mean no."""
        try:
            return self._read_key([("bold", clean(question)), ("", " [y]es [n]o › ")], "yn") == "y"
        except KeyboardInterrupt:
            return False

    def _confirm_rest(self, request: ApprovalRequest) -> bool:
        """``r``: show the later calls it approves (and those still asked), then yes or no."""
        rest = request.rest()
        parts: list[RenderableType] = [
            Text(f"[r] approves this call and {_calls(len(rest))} later in this step, as they are here "
                 "(not shown again):", "bold"), *_call_list(rest)]
        asked = [c for c in request.later if c.destructive]
        if asked:
            parts += [Text(f"still asked one by one (destructive): {_calls(len(asked))}", "dim"), *_call_list(asked)]
        show(self.console, Group(*parts))  # every argument whole: through the pager when taller than the screen
        return self.confirm(f"Approve this call and these {_calls(len(rest))}?")

    def _view(self, hidden: tuple[Hidden, ...]) -> None:
        """``v``: the folded values whole, through the pager when taller than the screen."""
        parts: list[RenderableType] = []
        for item in hidden:
            parts += [Text(f"{item.label}, whole ({len(item.value.plain):,} characters):", "bold"),
                      item.value]
        show(self.console, Group(*parts))

    # ----- prompts -----

    def _session(self, **kwargs: Any) -> PromptSession[str]:
        return PromptSession(input=self._input, output=self._output, **kwargs)

    def _read_key(self, message: list[tuple[str, str]], keys: str, enter: str | None = None) -> str:
        """One of ``keys`` (either case), shown after the prompt; other keys are ignored
        (Enter too, unless ``enter`` names the key it stands for)."""
        bindings = KeyBindings()
        for key in keys:
            for variant in {key, key.upper()}:
                bindings.add(variant)(_choose(key))
        bindings.add("<any>")(lambda event: None)
        bindings.add("enter")(_choose(enter) if enter else lambda event: None)
        bindings.add("c-d")(lambda event: event.app.exit(exception=KeyboardInterrupt()))
        session = self._session(key_bindings=bindings)
        if self._input is None:
            clear_typeahead(session.app.input)  # keys read by the last prompt after its Enter
            _discard_pending_keys(GRACE_S)
        return session.prompt(FormattedText(fit_question(message, self.console.width)))

    def _read_reason(self) -> str:
        try:
            return self._session().prompt("Reason (optional, Enter to skip) › ").strip()
        except EOFError:
            return ""

    def _edit(self, arguments: dict[str, Any], validate: Validate) -> dict[str, Any] | None:
        """Edited arguments that pass validation, or None when the user cancels."""
        text = json.dumps(arguments, ensure_ascii=False, indent=2)
        self.console.print(Text(EDIT_HINT, "dim"))
        while True:
            try:
                text = self._session(multiline=True).prompt("", default=text)
            except (KeyboardInterrupt, EOFError):
                self.console.print(Text("edit cancelled; arguments unchanged", "dim"))
                return None
            parsed, error = check_arguments(text, validate)
            if error is None:
                return parsed
            self.console.print(Text(f"✗ {clean(error)}", "red"))
            self.console.print(Text("fix them, or Ctrl-C to cancel the edit", "dim"))


def fit_question(message: list[tuple[str, str]], width: int) -> list[tuple[str, str]]:
    """``message`` broken into lines of fewer than ``width`` columns (room for the key typed
    after it) between words, a choice ("[r]est of step (+2)", "[x] skip", the closing "›")
    kept whole: the terminal would wrap it anywhere, inside a bracket too."""
    units: list[list[tuple[str, str]]] = []  # a unit is never broken; units are joined by a space
    in_choice = spaced = False
    for style, text in message:
        for n, word in enumerate(text.split(" ")):
            spaced = spaced or n > 0
            if not word:
                continue
            in_choice = word.startswith("[") or (in_choice and word != "›")
            if units and (not spaced or (in_choice and not word.startswith("[")) or word == "›"):
                units[-1].append((style, (" " if spaced else "") + word))
            else:
                units.append([(style, word)])
            spaced = False
    out: list[tuple[str, str]] = []
    used = 0
    for unit in units:
        size = sum(cell_len(text) for _, text in unit)
        if out:
            breaks = used + 1 + size > width - 3
            out.append((out[-1][0] if out[-1][0] == unit[0][0] else "", "\n" if breaks else " "))
            used = 0 if breaks else used + 1
        out += unit
        used += size
    if message and message[-1][1].endswith(" "):
        out.append(("", " "))
    merged: list[tuple[str, str]] = []  # one fragment per run of a style, as it was given
    for style, text in out:
        if merged and merged[-1][0] == style:
            merged[-1] = (style, merged[-1][1] + text)
        else:
            merged.append((style, text))
    return merged


def _discard_pending_keys(wait_s: float) -> None:
    """Wait ``wait_s`` (keys typed meanwhile are not echoed), then drop every key the
    terminal has queued. No-op without a terminal."""
    try:
        import termios

        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
    except Exception:  # not a terminal, or no termios (Windows)
        return
    try:
        termios.tcsetattr(fd, termios.TCSANOW, [*saved[:3], saved[3] & ~termios.ECHO, *saved[4:]])
        time.sleep(wait_s)
        termios.tcflush(fd, termios.TCIFLUSH)
    finally:
        with contextlib.suppress(termios.error):  # the terminal went away
            termios.tcsetattr(fd, termios.TCSANOW, saved)


def _choose(key: str) -> Callable[[Any], None]:
    def handler(event: Any) -> None:
        event.app.current_buffer.text = key  # leaves the answer visible after the prompt
        event.app.exit(result=key)

    return handler


def _keys(request: ApprovalRequest, folded: bool) -> str:
    return ("yn" + ("" if request.destructive else "a") + ("r" if request.rest() else "") + "e"
            + ("v" if folded else ""))


def _choice_prompt(request: ApprovalRequest, folded: bool) -> list[tuple[str, str]]:
    always = "" if request.destructive else " [a]lways"
    rest = f" [r]est of step (+{len(request.rest())})" if request.rest() else ""
    view = " [v]iew" if folded else ""
    return [("bold", "Allow?"), ("", f" [y]es [n]o{always}{rest} [e]dit{view} › ")]


def _calls(count: int) -> str:
    return f"{count} call" + ("" if count == 1 else "s")


def _call_list(calls: Iterable[PendingCall]) -> list[RenderableType]:
    """Each call: its name, then its arguments whole, wrapped under it."""
    lines: list[RenderableType] = []
    for call in calls:
        lines.append(Text(f"  {clean(call.name)}", "bold"))
        lines.append(Padding(Text(_value(call.arguments), overflow="fold"), (0, 0, 0, 4)))
    return lines


def check_arguments(text: str, validate: Validate) -> tuple[dict[str, Any], str | None]:
    """(arguments, None) when ``text`` is a JSON object that ``validate`` accepts, else ({}, error)."""
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        return {}, f"not valid JSON: {exc}"
    if not isinstance(parsed, dict):
        return {}, "the arguments must be a JSON object"
    error = validate(parsed)
    return (parsed, None) if error is None else ({}, error)


# ----- the panel -----

PROMPT_ROWS = 3  # left free under the card: the question and the line it is answered on
KEPT_ROWS = 3  # a folded value still shows its first lines


@dataclass(frozen=True)
class Field:
    """A value on the card: its key (empty for a block such as the arguments), the whole value
    as shown, and what ``[v]iew`` calls it."""

    key: Text
    value: Text
    label: str


@dataclass(frozen=True)
class Hidden:
    """A value the card shows only in part: ``[v]iew`` shows it whole."""

    label: str
    value: Text


Part = Text | tuple[Field, ...]  # a line of the card's own words, or fields with their keys aligned


def approval_panel(request: ApprovalRequest, arguments: dict[str, Any], edited: bool) -> ApprovalCard:
    """The change preview (+ new / ~ changed fields / - deleted item), a line or more a field,
    and the arguments only when they say what the preview does not (or were edited); a call
    whose preview failed says it will fail, one whose preview did not finish in time says so."""
    title = Text.assemble((clean(request.name), "bold"), " — needs approval")
    if request.count > 1:
        title.append(f" ({request.index}/{request.count})")
    parts: list[Part] = []
    preview = _preview(request, arguments) if edited else request.preview
    if preview is not None and "fails" in preview:
        parts.append(Text(f"✗ {_failure(preview['fails'])}: this call will fail", "bold red"))
    elif preview is not None and "unavailable" in preview:
        parts.append(Text(f"preview unavailable ({clean(str(preview['unavailable']))})", "dim"))
    elif preview is not None:
        parts += _preview_parts(preview.get("before"), preview.get("after"))
    elif request.preview is not None:
        parts.append(Text("no preview for the edited arguments", "dim"))
    replaced = (f"arguments (replaced by your hook {clean(short_command(request.amended_by, 60))})"
                if request.amended_by else "")
    if (edited or replaced or preview is None or preview.keys() & {"fails", "unavailable"}
            or not _said_by(arguments, preview)):
        label = "arguments (edited)" if edited else replaced or "arguments"
        parts.append(Text(label, "dim italic"))
        parts.append((Field(Text(), _arguments(arguments), "arguments"),))
    subtitle = Text("destructive: asked every time", "red") if request.destructive else None
    return ApprovalCard(parts, title, subtitle)


class ApprovalCard:
    """The approval panel: every value whole, wrapped at the width it is drawn at (keys aligned,
    a value's further lines under its first). When that is taller than the screen leaves for
    the card, the tallest values are folded, each saying how many lines it hides and that
    ``[v]iew`` shows it; ``hidden()`` lists them, so the question offers ``[v]``."""

    def __init__(self, parts: list[Part], title: Text, subtitle: Text | None) -> None:
        self.parts, self.title, self.subtitle = parts, title, subtitle

    def hidden(self, console: Console) -> tuple[Hidden, ...]:
        """The values folded when the card is drawn on ``console``."""
        return self._layout(console, console.options)[1]

    def _layout(self, console: Console, options: ConsoleOptions) -> tuple[list[Text], tuple[Hidden, ...]]:
        rows = (options.height or options.size.height) - PROMPT_ROWS - 2  # 2: the borders
        return _layout(self.parts, console, max(options.max_width - 4, 1), rows)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Panel]:
        lines, _ = self._layout(console, options)
        yield Panel(Group(*lines), title=self.title, title_align="left", subtitle=self.subtitle,
                    subtitle_align="right", border_style="yellow", expand=False)


def _arguments(arguments: dict[str, Any]) -> Text:
    """The arguments as JSON, whole: one line when short, else indented; every character a
    terminal could act on written as a ``\\u`` escape."""
    source = json_display(arguments)
    if len(source) > ONE_LINE_ARGS:
        source = json_display(arguments, indent=2)
    return JSONHighlighter()(Text(source))


def _failure(message: str) -> str:
    """'no todo todo-099' from 'no todo todo-099; existing ids: …' (the first clause)."""
    return clean(message).split("; ", 1)[0].strip() or "the tool refused these arguments"


def _said_by(arguments: dict[str, Any], preview: dict[str, Any]) -> bool:
    """Whether every argument value shows in the preview (then the arguments add nothing)."""
    shown = [str(v) for v in _leaves(preview)]
    return all(any(str(v) in text for text in shown) for v in _leaves(arguments) if v not in (None, ""))


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _preview(request: ApprovalRequest, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The preview for edited arguments: made anew by the tool when it can."""
    if request.preview_for is not None:
        try:
            return request.preview_for(arguments)
        except Exception:  # a preview is a courtesy; the call itself reports real errors
            return None
    if request.preview is None:
        return None
    after = request.preview.get("after")  # no way to ask the tool: patch what changed
    if isinstance(after, dict):
        after = {**after, **{k: v for k, v in arguments.items() if k in after}}
    return {**request.preview, "after": after}


def preview_view(before: Any, after: Any) -> RenderableType:
    """What will change, each value whole: a new item, changed fields old → new, or a deletion."""
    return _Parts(_preview_parts(before, after))


def _preview_parts(before: Any, after: Any) -> list[Part]:
    """The preview as parts: a heading, then a field a value. Fields the store keeps itself
    (``*_at`` timestamps) are left out; unchanged fields but the item's name too."""
    if not isinstance(before, dict | None) or not isinstance(after, dict | None):
        change = Text.assemble((_value(before), "red"), " → ", (_value(after), "green"))
        return [(Field(Text(), change, "change"),)]
    if before is None:
        if after is None:
            return [Text("no change", "dim")]
        return _fields(Text(f"+ new item {_ident(after, '')}".rstrip(), "bold green"), after, "green")
    if after is None:
        return _fields(Text(f"- delete {_ident(before)}", "bold red"), before, "red")
    changed = [key for key in list(before) + [k for k in after if k not in before]
               if before.get(key) != after.get(key) and not _bookkeeping(key)]
    fields: list[Field] = []
    for key in [k for k in CONTEXT_FIELDS if k in after and k not in changed] + changed:
        name, old, new = clean(str(key)), before.get(key), after.get(key)
        if key not in changed:
            fields.append(Field(Text(name, "dim"), Text(_value(new), "dim"), name))
        else:
            fields.append(Field(Text(name), Text.assemble((_value(old), "red"), " → ",
                                                          (_value(new), "bold green")), f"{name} (old → new)"))
    return [Text(f"~ change {_ident(before)}" if changed else "no change", "bold yellow"), tuple(fields)]


def _fields(heading: Text, item: dict[str, Any], colour: str) -> list[Part]:
    shown = {key: value for key, value in item.items()  # an empty field says nothing; the id is in the heading
             if value not in (None, "", [], {}) and key != "id" and not _bookkeeping(key)}
    return [heading, tuple(Field(Text(clean(str(key)), "dim"), Text(_value(value), colour), clean(str(key)))
                           for key, value in shown.items())]


# ----- laying the parts out: wrapped, and folded to fit the screen -----


@dataclass(frozen=True)
class _Row:
    """A part laid out at a width: its key's lines, its value's lines and where they start."""

    keys: tuple[Text, ...]
    values: tuple[Text, ...]
    indent: int  # the column the value starts at
    room: int  # the value's width
    field: Field | None  # None: the card's own words, never folded


class _Parts:
    """Parts drawn whole at the width given, nothing folded (a preview outside the card)."""

    def __init__(self, parts: list[Part]) -> None:
        self.parts = parts

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        yield from _layout(self.parts, console, options.max_width, None)[0]


def _layout(parts: list[Part], console: Console, width: int,
            rows: int | None) -> tuple[list[Text], tuple[Hidden, ...]]:
    """The lines of ``parts`` at ``width``, folded to at most ``rows`` lines when it can
    (None: never folded), and the values folded."""
    laid = _rows(parts, console, width)
    kept = {} if rows is None else _folds(laid, console, rows)
    hidden = tuple(Hidden(field.label, field.value) for n, row in enumerate(laid)
                   if n in kept and (field := row.field) is not None)
    lines: list[Text] = []
    for n, row in enumerate(laid):
        values = row.values
        if n in kept:
            values = values[: kept[n]] + _notice(row, len(values) - kept[n], console)
        for k in range(max(len(row.keys), len(values))):
            key = row.keys[k] if k < len(row.keys) else Text()
            line = Text.assemble(key, " " * (row.indent - key.cell_len))
            lines.append(line.append_text(values[k]) if k < len(values) else line)
    return lines, hidden


def _rows(parts: list[Part], console: Console, width: int) -> list[_Row]:
    rows: list[_Row] = []
    for part in parts:
        if isinstance(part, Text):
            rows.append(_Row((), _wrap(part, console, width), 0, width, None))
            continue
        widest = max((field.key.cell_len for field in part), default=0)
        indent = min(widest + 2, width // 2) if widest else 0  # a long key is wrapped in its column
        for field in part:
            keys = _wrap(field.key, console, indent - 2) if field.key.plain else ()
            room = max(width - indent, 1)
            rows.append(_Row(keys, _wrap(field.value, console, room), indent, room, field))
    return rows


def _folds(laid: list[_Row], console: Console, rows: int) -> dict[int, int]:
    """The lines each folded value keeps (by its row's index) so that ``laid`` fits in ``rows``:
    the tallest values folded first, none to fewer than ``KEPT_ROWS`` lines."""
    excess = sum(max(len(row.keys), len(row.values)) for row in laid) - rows
    kept: dict[int, int] = {}
    for n in sorted((n for n, row in enumerate(laid) if row.field), key=lambda n: -len(laid[n].values)):
        row = laid[n]
        notice = len(_notice(row, len(row.values), console))  # the most lines it can take
        keep = max(KEPT_ROWS, len(row.values) - excess - notice)
        if excess <= 0 or keep + notice >= len(row.values):
            break  # the rest are shorter: folding them would hide nothing or add lines
        kept[n] = keep
        excess -= max(len(row.keys), len(row.values)) - max(len(row.keys), keep + notice)
    return kept


def _notice(row: _Row, hidden_lines: int, console: Console) -> tuple[Text, ...]:
    """What a folded value says under its first lines, wrapped in its column."""
    size = len(row.field.value.plain) if row.field else 0
    said = Text(f"▸ {hidden_lines:,} more lines hidden ({size:,} characters in all): "
                "[v]iew shows it whole", "bold yellow")
    return _wrap(said, console, row.room)


def _wrap(text: Text, console: Console, width: int) -> tuple[Text, ...]:
    return tuple(text.wrap(console, max(width, 1), overflow="fold"))


def _bookkeeping(key: Any) -> bool:
    return isinstance(key, str) and key.endswith("_at")


def _ident(item: dict[str, Any], unnamed: str = "item") -> str:
    return clean(str(item.get("id", ""))) or unnamed


def _value(value: Any) -> str:
    """``value`` whole, as text that is safe to show."""
    if value is None:
        return "—"
    return clean(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
