"""Step mode's two pauses on the terminal (the loop's ``Stepper``).

Before a model call: a panel with what the request adds since the previous
one (in wire form), the tools offered, the estimated input tokens and the
share that is an unchanged prefix; keys Enter/``c`` continue, ``e`` edit the
last message (the approval dialog's editor: text for a question, JSON checked
as a result for a tool result), ``s`` send with tools disabled, ``v`` view the
whole request exactly as it will be sent (paged when taller than the screen),
``q`` stop.
After a model's answer: its tool calls; for each, ``c`` continue, ``x`` skip,
``r`` a result by hand (JSON checked as a result), ``q`` stop. Ctrl-C raises
KeyboardInterrupt (the loop ends the turn as interrupted). Keys typed before a
question is on screen never answer it (the approval dialog's rule).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from repl.loop.stepping import (
    BeforeCall,
    CallView,
    Continue,
    Edit,
    ForCall,
    NoTools,
    RequestView,
    Result,
    Skip,
    Stop,
    check_edit,
    check_result,
)
from repl.ui.approval_dialog import ApprovalDialog
from repl.ui.escape import clean, json_display, json_text
from repl.ui.pager import show

SHOWN_MESSAGES = 6  # new messages shown in full; more are counted
SHOWN_TOOLS = 8
MESSAGE_CHARS = 4000  # a new message is shown as compact JSON up to this (its strings cut at 240)
RESULT_TEMPLATE = '{\n  "ok": true,\n  "result": ""\n}'
EDIT_HINT = "Esc-Enter (or Alt-Enter) accepts, Ctrl-C cancels."


class StepDialog:
    def __init__(self, console: Console, dialog: ApprovalDialog) -> None:
        self.console = console
        self.dialog = dialog  # its key reader and editor (and their injected input and output)

    def before_model_call(self, view: RequestView) -> BeforeCall:
        self.console.print(request_panel(view))
        editable = view.last_role in ("user", "tool")
        what = "question" if view.last_role == "user" else "tool result"
        keys = "c" + ("e" if editable else "") + ("s" if view.tools else "") + "vq"
        prompt = [("bold", "Send?"), ("", " [c]ontinue/Enter"
                                      + (f" [e]dit {what}" if editable else "")
                                      + (" [s] without tools" if view.tools else "")
                                      + " [v]iew whole request [q] stop turn › ")]
        while True:
            key = self.dialog._read_key(prompt, keys, enter="c")
            if key == "q":
                return Stop()
            if key == "s":
                return NoTools()
            if key == "v":
                show(self.console, whole_request(view))
                continue
            if key != "e":
                return Continue()
            text = view.last_content
            if view.last_role == "tool":
                text = _pretty(text)
            edited = self._edit(f"Edit the {what} before it is sent: {EDIT_HINT}", text,
                                lambda t: check_edit(view.last_role, t))
            if edited is not None:
                return Edit(edited)

    def after_model_answer(self, calls: list[CallView]) -> list[ForCall]:
        self.console.print(calls_panel(calls))
        choices: list[ForCall] = []
        for call in calls:
            prompt = [("bold", f"{call.index}/{call.count} {clean(call.name)}:"),
                      ("", " [c]ontinue/Enter [x] skip [r]esult by hand [q] stop turn › ")]
            while True:
                key = self.dialog._read_key(prompt, "cxrq", enter="c")
                if key == "q":
                    return [*choices, Stop()]
                if key == "x":
                    choices.append(Skip())
                elif key == "r":
                    made = self._edit(f"The result of {clean(call.name)}, as JSON: {EDIT_HINT}", RESULT_TEMPLATE,
                                      _check_result_text)
                    if made is None:
                        continue  # cancelled: ask again
                    choices.append(Result(json.loads(made)))
                else:
                    choices.append(Continue())
                break
        return choices

    def _edit(self, hint: str, text: str, check: Callable[[str], str | None]) -> str | None:
        """The edited text once ``check`` accepts it, or None when the user cancels (Ctrl-C)."""
        self.console.print(Text(hint, "dim"))
        while True:
            try:
                text = self.dialog._session(multiline=True).prompt("", default=text)
            except (KeyboardInterrupt, EOFError):
                self.console.print(Text("edit cancelled; nothing changed", "dim"))
                return None
            error = check(text)
            if error is None:
                return text
            self.console.print(Text(f"✗ {clean(error)}", "red"))
            self.console.print(Text("fix it, or Ctrl-C to cancel the edit", "dim"))


def _check_result_text(text: str) -> str | None:
    try:
        return check_result(json.loads(text))
    except ValueError as exc:
        return f"not valid JSON: {exc}"


def _pretty(text: str) -> str:
    try:
        return json.dumps(json.loads(text), ensure_ascii=False, indent=2)
    except ValueError:
        return text


def request_panel(view: RequestView) -> Panel:
    title = Text.assemble((f"step {view.step}", "bold"), " · before the model call · ", clean(view.model))
    if view.final:
        title.append(" · last call, tools off (a guard tripped)")
    added = len(view.new_messages)
    parts: list[RenderableType] = [Text(
        f"sends all {view.total_messages} messages (nothing before to compare)" if added == view.total_messages
        else f"adds {added} of {view.total_messages} messages since the previous request", "dim")]
    for message in view.new_messages[-SHOWN_MESSAGES:] if added > SHOWN_MESSAGES else view.new_messages:
        parts.append(json_text(message, string_chars=240, one_line_chars=MESSAGE_CHARS))  # one line, wrapped
    if added > SHOWN_MESSAGES:
        parts.insert(1, Text(f"… {added - SHOWN_MESSAGES} earlier new messages not shown", "dim"))
    names = ", ".join(clean(n) for n in view.tools[:SHOWN_TOOLS])
    more = f", … ({len(view.tools)})" if len(view.tools) > SHOWN_TOOLS else ""
    parts.append(Text(f"tools offered: {names}{more}" if view.tools else "tools offered: none", "dim"))
    share = 100 * view.prefix_tokens / view.input_tokens if view.input_tokens else 0.0
    parts.append(Text(f"~{view.input_tokens:,} input tokens (estimated) · {share:.0f}% unchanged prefix "
                      f"(~{view.prefix_tokens:,}, cacheable)", "dim"))
    return Panel(Group(*parts), title=title, title_align="left", border_style="magenta", expand=False)


def whole_request(view: RequestView) -> RenderableType:
    """The request body exactly as it will be sent: nothing cut, every character a terminal
    could act on shown as a ``\\u`` escape."""
    from rich.highlighter import JSONHighlighter

    title = Text(f"step {view.step} · the whole request, as it will be sent", "bold")
    return Group(title, JSONHighlighter()(Text(json_display(view.request, indent=2))))


def calls_panel(calls: list[CallView]) -> Panel:
    title = Text.assemble(("the model asks for ", ""), (f"{len(calls)} tool call" + ("" if len(calls) == 1 else "s"),
                                                         "bold"), " · before they run")
    parts: list[RenderableType] = []
    for call in calls:
        heading = Text.assemble((f"{call.index}. ", "dim"), (clean(call.name), "bold"))
        arguments = json_text(call.arguments, max_lines=8, string_chars=240, one_line_chars=60)
        if "\n" not in arguments.plain:
            heading.append("  ").append_text(arguments)
        if call.side_effects:
            heading.append(" · side effects: asks for approval when it runs", "yellow")
        parts.append(heading)
        if "\n" in arguments.plain:
            parts.append(arguments)
    return Panel(Group(*parts), title=title, title_align="left", border_style="magenta", expand=False)
