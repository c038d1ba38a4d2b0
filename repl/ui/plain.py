"""Plain lines for scripts: the surface of ``glassloop ask``, with nobody at the terminal.

Progress goes to stderr as plain lines (``step 1 call list_todos {}``), the answer to stdout
as it streams (``AnswerStream``), one JSON object (``PlainLines.json``), or every event as a
JSON line while the turn runs, that object last (``EventLines``: ``--stream-json``). Secrets
are redacted from everything printed, with the redactor the trace uses; streamed text is cut
only where no secret can continue across the cut. Model, tool and server text is untrusted:
progress lines are always cleaned of escape sequences and control characters; the answer is
cleaned only when stdout is a terminal, so piped output stays byte-exact; the JSON escapes
the C1 controls and bidirectional overrides that JSON itself leaves raw. No Rich here.
"""

from __future__ import annotations

import json
import re
import threading
import time
import unicodedata
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TextIO

from repl.config.load import Settings
from repl.config.redact import Redactor, redactor_for
from repl.loop.approval import Asker
from repl.loop.events import (
    ApprovalDecided,
    ErrorEvent,
    Event,
    EventLog,
    GuardTripped,
    HookRan,
    ModelUsage,
    Notice,
    ReasoningDelta,
    Routed,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    WireRecord,
    to_dict,
)
from repl.ui.escape import clean, json_display

MAX_HELD_CHARS = 8192  # streamed text held back for a line (or word) end, at most
STREAM_VERSION = 1  # the "v" of every --stream-json line (docs/EXPORTING.md)
BATCH_S = 0.05  # --stream-json: streamed text goes out at most this often


class Unattended:
    """The part of a surface with nobody at it (``ask``, a ``/compare`` run): no live area,
    no question answered, no one to approve, nothing to show while waiting."""

    def waiting(self, status: str | None) -> None:
        pass

    def stop_live(self) -> None:
        pass

    def confirm(self, question: str) -> bool:
        return False

    def asker(self) -> Asker | None:
        return None


class PlainLines(Unattended):
    """The session's surface for ``ask``: every event kept (``log``), the streamed answer on
    ``out`` unless the result is one JSON object, progress, notes and errors as lines on
    ``err``; what it waits for is a status line written over in place when ``err`` is a
    terminal, else each phase once (``preparing …``, ``starting …``), not every tick."""

    def __init__(self, settings: Settings, out: TextIO, err: TextIO, *, stream_answer: bool,
                 stream_events: bool = False) -> None:
        self.out, self.err, self.terminal = out, err, _is_terminal(err)
        self.redact = redactor_for(settings)
        self.log = EventLog()
        self.answer = AnswerStream(out, self.redact, _is_terminal(out)) if stream_answer else None
        self.events = EventLines(out, self.redact) if stream_events else None
        self._phases: set[str] = set()
        self._in_place = False  # a status line is on the screen

    def render(self, event: Event) -> None:
        self.log(event)
        if self.answer:
            self.answer(event)
        if self.events:
            self.events(event)
        if line := _progress_line(event):
            self.info(line)

    def info(self, text: str) -> None:
        print(clean(self.redact(text)), file=self.err, flush=True)

    def error(self, text: str) -> None:
        self.info(f"error: {text}")

    def json(self, payload: dict[str, Any]) -> None:
        """The one JSON object of ``ask --json``, redacted (with ``--stream-json``: the last line)."""
        if self.events:
            self.events.result(payload)
            return
        print(json_display(self.redact.value(payload)), file=self.out, flush=True)

    def waiting(self, status: str | None) -> None:
        if status and status.startswith("waiting for MCP"):  # ticks each second: in place, or nothing
            if self.terminal:
                self.err.write("\r\x1b[2K" + clean(status))
                self.err.flush()
                self._in_place = True
            return
        if status is None:
            if self._in_place:
                self.err.write("\r\x1b[2K")
                self.err.flush()
                self._in_place = False
            return
        phase = status.split("…")[0]
        if phase not in self._phases:
            self._phases.add(phase)
            self.info(phase.strip() + "…")


def _progress_line(event: Event) -> str | None:
    """The progress line of an event, if it has one."""
    if isinstance(event, ToolCallStarted):
        args = json.dumps(event.arguments, ensure_ascii=False) if not isinstance(event.arguments, str) else event.arguments
        return f"step {event.step} call {event.name} {args}"
    if isinstance(event, ToolCallFinished):
        status = "ok" if event.ok else f"error {event.error_type}"
        if event.repeat_of:
            return f"step {event.step} repeat {event.name} {status}: identical to {event.repeat_of}, not run again"
        return f"step {event.step} done {event.name} {status} {event.duration_s * 1000:.0f} ms"
    if isinstance(event, ApprovalDecided) and not event.allowed:
        return f"step {event.step} denied {event.name}: {event.reason}"
    if isinstance(event, ModelUsage):
        u = event.usage
        mark = "~" if u.estimated else ""
        return (f"step {event.step} model in {mark}{u.input_tokens} (cached {u.cached_tokens}) "
                f"out {mark}{u.output_tokens} {event.latency_s:.2f} s")
    if isinstance(event, GuardTripped):
        return f"stopped: {event.guard} ({event.detail})"
    if isinstance(event, ErrorEvent):
        return f"error: {event.message}"
    if isinstance(event, Notice):
        return event.message
    if isinstance(event, Routed):
        return f"step {event.step} {event.said()}"
    if isinstance(event, HookRan):
        return event.said()
    return None


class AnswerStream:
    """The model's text on stdout as it streams (the answer, and any text it wrote before
    calling tools). On a terminal it is cleaned and written a word at a time; piped it
    stays byte-exact and is written a line at a time. Either way a secret is never split
    across two writes, so each write can be redacted on its own (keys hold no spaces)."""

    def __init__(self, out: TextIO, redact: Redactor, terminal: bool) -> None:
        self.out, self.redact, self.terminal = out, redact, terminal
        self._held = ""
        self._line_open = False  # the last write did not end a line

    def __call__(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self._held += event.text
            cut = _word_break(self._held) if self.terminal else self._held.rfind("\n") + 1
            if len(self._held) - cut > MAX_HELD_CHARS:  # a line (or word) without end: out it goes
                cut = len(self._held)
            ready, self._held = self._held[:cut], self._held[cut:]
            self._write(ready)
        elif isinstance(event, ModelUsage | ErrorEvent | TurnFinished):  # the call's text is whole
            ready, self._held = self._held, ""
            self._write(ready + ("\n" if self._line_open or (ready and not ready.endswith("\n")) else ""))

    def _write(self, text: str) -> None:
        if not text:
            return
        text = self.redact(text)
        self.out.write(clean(text) if self.terminal else text)
        self.out.flush()
        self._line_open = not text.endswith("\n")


def _word_break(text: str) -> int:
    """Where ``text`` may be cut for writing: after its last whitespace, unless the word
    before is "Bearer" (a token follows it; redaction needs both)."""
    for match in reversed(list(re.finditer(r"\s+", text))):
        before = text[: match.start()].rsplit(None, 1)
        if not (before and before[-1].lower() == "bearer"):
            return match.end()
    return 0


Delta = TextDelta | ReasoningDelta


class EventLines:
    """``ask --stream-json``: each event of the turn as one JSON line on ``out`` while it runs,
    flushed per line, ``ask --json``'s object last (``result``). A line is the event's fields as
    the trace writes them, with ``"v"`` and ``"t"`` (seconds since the turn began) added; raw
    bodies (``wire``) stay out, as they stay out of the trace. Consecutive deltas of one kind and
    step are joined: held text goes out at most every ``batch_s`` (a timer lets it out when no
    delta follows), up to where ``stream_cut`` allows, and whole at the next event of another
    kind, where the trace ends its joined text too. Events come from the turn's thread and from
    background threads (notices): one lock keeps the lines whole and in order."""

    def __init__(self, out: TextIO, redact: Redactor, *, batch_s: float = BATCH_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.out, self.redact, self.batch_s, self.clock = out, redact, batch_s, clock
        self.start = clock()
        self.broken = False  # stdout went away (a closed pipe): the turn goes on, unread
        self._lock = threading.RLock()
        self._held: Delta | None = None  # the first delta of the text held back
        self._text = ""
        self._arrived: list[tuple[int, float]] = []  # where each held delta begins in _text, and when
        self._last_out = float("-inf")
        self._timer: threading.Timer | None = None
        # the configured secrets a cut after whitespace or a wide character could split
        self._secrets = tuple(s for s in redact.secrets if not s.isascii() or any(c.isspace() for c in s))

    def __call__(self, event: Event) -> None:
        if isinstance(event, WireRecord):
            return
        with self._lock:
            if isinstance(event, TextDelta | ReasoningDelta):
                self._hold(event)
                return
            self._let_out(whole=True)
            self._line(to_dict(event), self._since())

    def result(self, payload: dict[str, Any]) -> None:
        """The last line: ``ask --json``'s object, with ``"type": "result"``."""
        with self._lock:
            self._let_out(whole=True)
            self._line({"type": "result", **payload}, self._since())

    def _since(self) -> float:
        return self.clock() - self.start

    def _hold(self, event: Delta) -> None:
        held = self._held
        if held is not None and (type(held) is not type(event) or held.step != event.step):
            self._let_out(whole=True)
        if self._held is None:
            self._held = event
        self._arrived.append((len(self._text), self._since()))
        self._text += event.text
        wait = self._last_out + self.batch_s - self.clock()
        if wait <= 0:
            self._let_out(whole=False)
        elif self._timer is None:
            self._timer = threading.Timer(wait, self._tick)
            self._timer.daemon = True
            self._timer.start()

    def _tick(self) -> None:
        with self._lock:
            self._timer = None
            self._let_out(whole=False)

    def _let_out(self, *, whole: bool) -> None:
        """The text held as one line: all of it (``whole``), or up to where it may be cut."""
        if whole and self._timer is not None:
            self._timer.cancel()
            self._timer = None
        held = self._held
        if held is None:
            return
        cut = len(self._text) if whole else stream_cut(self._text, self._secrets)
        if cut == 0:
            return
        ready, self._text, at = self._text[:cut], self._text[cut:], self._arrived[0][1]
        first = max(i for i, (start, _) in enumerate(self._arrived) if start <= cut)  # the rest's first piece
        self._arrived = [(max(0, start - cut), t) for start, t in self._arrived[first:]] if self._text else []
        if not self._text:
            self._held = None
        self._line(to_dict(replace(held, text=ready)), at)
        self._last_out = self.clock()

    def _line(self, record: dict[str, Any], at: float) -> None:
        if self.broken:
            return
        kind = record.pop("type")
        line = json_display(self.redact.value({"v": STREAM_VERSION, "type": kind, "t": round(at, 3), **record}))
        try:
            self.out.write(line + "\n")
            self.out.flush()
        except (OSError, ValueError):  # a closed pipe (`| head -1`) or stream
            self.broken = True


_SPACES = re.compile(r"\s+")
_WIDE = re.compile(r"[^\x00-\x7f]")
# what a secret's shape begins with (repl/config/redact.py): a word holding one is not cut inside
_SHAPE_START = re.compile(r"(?i)[?&;=]|://|sk-|bearer")


def stream_cut(text: str, secrets: tuple[str, ...] = ()) -> int:
    """How much of ``text`` (streamed text held back) may go out now, so that redacting each
    part on its own blanks what redacting the whole would: a cut after whitespace (not after
    the word "Bearer": a token follows it), or inside a word after a character outside ASCII
    (Chinese has no spaces) when the word holds nothing a secret's shape begins with; never
    inside one character as drawn (the last character waits for the next, which may be a mark
    or a joiner of it), nor where a configured secret holding such characters (``secrets``)
    could go on. 0: none yet."""
    known = len(text) - 1  # a cut falls before a character already here
    if known < 1:
        return 0
    runs = list(_SPACES.finditer(text, 0, known))
    cut = _in_last_word(text, runs[-1].end() if runs else 0, known) or _after_space(text, runs)
    return 0 if cut and _splits_secret(text, cut, secrets) else cut


def _in_last_word(text: str, start: int, known: int) -> int:
    if _SHAPE_START.search(text, start):
        return 0
    for wide in reversed(list(_WIDE.finditer(text, start, known))):
        if not _joins(text[wide.start()], text[wide.end()]):
            return wide.end()
    return 0


def _after_space(text: str, runs: list[re.Match[str]]) -> int:
    for i in range(len(runs) - 1, -1, -1):
        run, word_start = runs[i], runs[i - 1].end() if i else 0
        if text[word_start:run.start()][-6:].lower() == "bearer" or _joins(text[run.end() - 1], text[run.end()]):
            continue
        return run.end()
    return 0


def _joins(before: str, after: str) -> bool:
    """Whether ``before`` and ``after`` are drawn as one character: a combining mark, a
    zero-width joiner, a variation selector, a skin tone or tag after it; a flag's two letters."""
    code = ord(after)
    return (unicodedata.category(after).startswith("M") or "\u200d" in (before, after)
            or 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF or 0x1F3FB <= code <= 0x1F3FF
            or 0xE0020 <= code <= 0xE007F or (before, after) == ("\r", "\n")
            or (0x1F1E6 <= ord(before) <= 0x1F1FF and 0x1F1E6 <= code <= 0x1F1FF))


def _splits_secret(text: str, cut: int, secrets: tuple[str, ...]) -> bool:
    """Whether one of ``secrets`` may span ``cut``: the text before it ends with the secret's
    beginning and what follows agrees with the secret's rest so far."""
    rest = text[cut:]
    return any(text.endswith(secret[:k], 0, cut) and (secret[k:].startswith(rest) or rest.startswith(secret[k:]))
               for secret in secrets for k in range(1, len(secret)))


def _is_terminal(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False
