"""The input line, driven through prompt_toolkit pipe input."""

from __future__ import annotations

import io
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.data_structures import Size
from prompt_toolkit.document import Document
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput
from prompt_toolkit.output.vt100 import Vt100_Output

from repl.ui.prompt import PromptInput, SlashCompleter

MODELS = ["gpt-4o", "gpt-4o-mini", "qwen2.5-coder"]
COMMANDS = [
    ("help", "show the commands", None),
    ("history", "past inputs", None),
    ("model", "switch the model", lambda typed: MODELS),
    ("/trace", "the last turn's timeline", lambda typed: ["all", "--json", "--save"]),
]


def read(keys: str, history: Path | None = None) -> str:
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        return PromptInput(history, COMMANDS, input=pipe, output=DummyOutput()).read()


def read_in_steps(prompt: Callable[[PipeInput], PromptInput],
                  steps: list[tuple[Callable[[PromptInput], bool], str]]) -> str:
    """Send each step's keys once its condition holds (completion runs asynchronously)."""
    with create_pipe_input() as pipe:
        prompt_input = prompt(pipe)

        def feed() -> None:
            for ready, keys in steps:
                deadline = time.monotonic() + 5
                while not ready(prompt_input) and time.monotonic() < deadline:
                    time.sleep(0.01)
                pipe.send_text(keys)

        threading.Thread(target=feed, daemon=True).start()
        return prompt_input.read()


def buffer_is(text: str) -> Callable[[PromptInput], bool]:
    return lambda prompt_input: prompt_input.session.default_buffer.text == text


def always(prompt_input: PromptInput) -> bool:
    return True


def test_enter_submits() -> None:
    assert read("hello there\r") == "hello there"
    assert read("line feed submits too\n") == "line feed submits too"


def test_alt_enter_and_esc_enter_insert_a_newline() -> None:
    assert read("first\x1b\rsecond\x1b\rthird\r") == "first\nsecond\nthird"


def test_bracketed_paste_stays_one_message() -> None:
    assert read("look: \x1b[200~line 1\r\nline 2\rline 3\x1b[201~ ok\r") == "look: line 1\nline 2\nline 3 ok"


def test_ctrl_c_and_ctrl_d() -> None:
    with pytest.raises(KeyboardInterrupt):
        read("some text\x03")
    with pytest.raises(EOFError):
        read("\x04")


def test_history_is_kept_in_a_file_and_recalled_with_up(tmp_path: Path) -> None:
    path = tmp_path / "data" / "input_history"
    assert read("first question\r", path) == "first question"
    assert read("multi\x1b\rline\r", path) == "multi\nline"
    assert path.exists() and "first question" in path.read_text()
    assert read("\x1b[A\r", path) == "multi\nline"
    # Up inside a recalled multi-line entry moves between its lines first
    assert read("\x1b[A\x1b[A\x1b[A\r", path) == "first question"


def test_completer_command_names_with_help() -> None:
    completer = SlashCompleter(COMMANDS)
    found = list(completer.get_completions(Document("/h"), CompleteEvent()))
    assert [c.text for c in found] == ["/help", "/history"]
    assert [c.display_meta_text for c in found] == ["show the commands", "past inputs"]
    assert all(c.start_position == -2 for c in found)
    assert [c.text for c in completer.get_completions(Document("/"), CompleteEvent())] == [
        "/help", "/history", "/model", "/trace"]
    assert list(completer.get_completions(Document("hello /h"), CompleteEvent())) == []


def test_completer_arguments() -> None:
    completer = SlashCompleter(COMMANDS)
    found = list(completer.get_completions(Document("/model gpt-4o-"), CompleteEvent()))
    assert [(c.text, c.start_position) for c in found] == [("gpt-4o-mini", -7)]
    found = list(completer.get_completions(Document("/trace all --"), CompleteEvent()))
    assert [c.text for c in found] == ["--json", "--save"]
    assert list(completer.get_completions(Document("/help x"), CompleteEvent())) == []
    assert list(completer.get_completions(Document("/nope x"), CompleteEvent())) == []


def test_a_failing_argument_completer_completes_nothing() -> None:
    def broken(typed: str) -> list[str]:
        raise RuntimeError("boom")

    completer = SlashCompleter([("model", "m", broken)])
    assert list(completer.get_completions(Document("/model g"), CompleteEvent())) == []
    completer.set_commands([("model", "m", lambda typed: ["gpt"])])
    assert [c.text for c in completer.get_completions(Document("/model g"), CompleteEvent())] == ["gpt"]


def test_tab_completes_a_slash_command_and_its_argument() -> None:
    def make(pipe: PipeInput) -> PromptInput:
        return PromptInput(None, COMMANDS, input=pipe, output=DummyOutput())

    assert read_in_steps(make, [(always, "/mo"), (buffer_is("/mo"), "\t"),
                                (buffer_is("/model"), "\r")]) == "/model"
    assert read_in_steps(make, [(always, "/model qwen"), (buffer_is("/model qwen"), "\t"),
                                (buffer_is("/model qwen2.5-coder"), "\r")]) == "/model qwen2.5-coder"


def test_bottom_toolbar_shows_the_callables_text_cleaned() -> None:
    screen = io.StringIO()
    output = Vt100_Output(screen, lambda: Size(rows=24, columns=80), term="xterm")

    def make(pipe: PipeInput) -> PromptInput:
        pipe.send_text("\x1b[1;1R")  # the cursor position report a terminal would send
        return PromptInput(None, COMMANDS, toolbar=lambda width: "qwen · approvals ask · [red]12%\x1b[31m",
                           input=pipe, output=output)

    def toolbar_drawn(prompt_input: PromptInput) -> bool:
        return "approvals ask" in screen.getvalue()

    assert read_in_steps(make, [(toolbar_drawn, "hi\r")]) == "hi"
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue())
    assert "qwen · approvals ask · [red]12%" in drawn and "\x1b[31m" not in screen.getvalue()


def test_a_failing_toolbar_shows_nothing() -> None:
    def broken(width: int) -> str:
        raise RuntimeError("boom")

    with create_pipe_input() as pipe:
        prompt_input = PromptInput(None, [], toolbar=broken, input=pipe, output=DummyOutput())
        assert prompt_input._toolbar_text() == ""
