"""Choosing one line of a list with the arrow keys and Enter (``--resume``, ``/resume``, ``/rewind``).

An inline prompt_toolkit application, erased when done: ↑/↓ (or Ctrl-P/Ctrl-N,
k/j) move, Home/End jump, Enter picks, Esc, q, Ctrl-C or Ctrl-D cancel. Rows
are untrusted text (a session's first message): cleaned and cut to one line.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from prompt_toolkit.application import Application
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.layout import Layout, Window
from prompt_toolkit.layout.controls import FormattedTextControl
from prompt_toolkit.output import Output

from repl.ui.escape import one_line

MAX_VISIBLE = 12  # rows shown at once; the list scrolls past them
MESSAGE_ROOM = 20  # a session's first message gets at least this, else the start time, model, turns give way


def pick(title: str, rows: Sequence[str], *, at: int = 0, input: Input | None = None,
         output: Output | None = None) -> int | None:
    """The index of the row chosen (``at``: the one chosen at first), or None when cancelled
    (or there are no rows)."""
    if not rows:
        return None
    state = {"at": max(0, min(len(rows) - 1, at))}
    bindings = KeyBindings()

    def move(to: int) -> None:
        state["at"] = max(0, min(len(rows) - 1, to))

    for keys, step in ((("up",), -1), (("c-p",), -1), (("k",), -1), (("down",), 1), (("c-n",), 1), (("j",), 1)):
        bindings.add(*keys)(lambda event, step=step: move(state["at"] + step))
    bindings.add("home")(lambda event: move(0))
    bindings.add("end")(lambda event: move(len(rows) - 1))
    bindings.add("enter")(lambda event: event.app.exit(result=state["at"]))
    for key in ("escape", "q", "c-c", "c-d"):
        bindings.add(key)(lambda event: event.app.exit(result=None))

    def text() -> StyleAndTextTuples:
        first = min(max(0, state["at"] - MAX_VISIBLE // 2), max(0, len(rows) - MAX_VISIBLE))
        shown = range(first, min(len(rows), first + MAX_VISIBLE))
        lines: StyleAndTextTuples = [("bold", one_line(title, 200) + "\n")]
        for i in shown:
            chosen = i == state["at"]
            lines.append(("reverse" if chosen else "", ("› " if chosen else "  ") + rows[i]))
            lines.append(("", "\n"))
        if len(rows) > MAX_VISIBLE:
            lines.append(("italic", f"  ({state['at'] + 1} of {len(rows)})"))
        return lines

    app: Application[int | None] = Application(
        layout=Layout(Window(FormattedTextControl(text, show_cursor=False), dont_extend_height=True)),
        key_bindings=bindings, full_screen=False, erase_when_done=True, input=input, output=output)
    return app.run()


def session_rows(sessions: Sequence[Any], width: int) -> list[str]:
    """One line per ``journal.SessionInfo``: its id (what ``--resume`` takes; two sessions of
    the same minute differ by it), the start time, turns and model as room allows, then the
    first message."""
    models = max((len(one_line(s.model, 24)) for s in sessions), default=0)
    columns = [lambda s: s.id, lambda s: time.strftime("%Y-%m-%d %H:%M", time.localtime(s.started)),
               lambda s: f"{s.turns} turn{'' if s.turns == 1 else 's'}".rjust(9),
               lambda s: one_line(s.model, 24).ljust(models)]
    for leave_out in ((), (1,), (1, 3), (1, 2, 3)):  # the id holds the start time too
        shown = [c for n, c in enumerate(columns) if n not in leave_out]
        room = width - sum(len(c(sessions[0])) + 2 for c in shown) if sessions else width
        if room >= MESSAGE_ROOM:
            break
    rows = []
    for s in sessions:
        head = "".join(c(s) + "  " for c in shown)
        rows.append(head + one_line(s.first, max(10, width - len(head))))
    return rows
