"""``glassloop eval``'s case file is read by the rules of a folder's files and parsed with a depth
limit: deep nesting, an endless device and a FIFO are each one line and exit 2, never a
traceback or a wait. The real command runs in a subprocess with a timeout (a FIFO nobody
writes to would block an ordinary read forever) and a memory limit (``/dev/zero`` never ends).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from repl.trials.evaluate import MAX_DEPTH, CaseFileError, bracket_depth, load_cases

pytestmark = pytest.mark.timeout(120)

CASE = '[[case]]\nmessage = "Hello"\ntool = ""\n'
MEMORY_LIMIT = 2 * 1024**3  # an endless read stops here with MemoryError instead of filling the machine


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def eval_of(cases: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real ``glassloop eval CASES``; TimeoutExpired (the test fails) rather than a wait."""
    return subprocess.run([sys.executable, "-m", "repl.cli", "eval", cases, "--base-url", "http://127.0.0.1:9/v1"],
                          env=env, capture_output=True, text=True, timeout=30, preexec_fn=_limited)


def one_line_refusal(done: subprocess.CompletedProcess[str], *said: str) -> None:
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr[-2000:]
    assert done.stderr.startswith("error: ") and all(part in done.stderr for part in said), done.stderr
    assert done.stdout == ""


def test_deeply_nested_arrays_are_refused_in_one_line(tmp_path: Path, home: dict[str, str]) -> None:
    cases = tmp_path / "deep.toml"
    cases.write_text(CASE + "args = { a = " + "[" * 5000 + "]" * 5000 + " }\n", encoding="utf-8")
    one_line_refusal(eval_of(str(cases), home), str(cases), f"nest deeper than {MAX_DEPTH} levels")


def test_deeply_nested_inline_tables_are_refused_in_one_line(tmp_path: Path, home: dict[str, str]) -> None:
    cases = tmp_path / "deep.toml"
    cases.write_text(CASE + "args = " + "{ a = " * 5000 + "1" + " }" * 5000 + "\n", encoding="utf-8")
    one_line_refusal(eval_of(str(cases), home), str(cases), f"nest deeper than {MAX_DEPTH} levels")


def test_dev_zero_is_refused_in_one_line(home: dict[str, str]) -> None:
    one_line_refusal(eval_of("/dev/zero", home), "/dev/zero", "system path")


def test_a_fifo_is_refused_at_once(tmp_path: Path, home: dict[str, str]) -> None:
    fifo = tmp_path / "cases.toml"
    os.mkfifo(fifo)
    one_line_refusal(eval_of(str(fifo), home), str(fifo), "a FIFO, not a regular file")


def test_a_case_file_over_the_cap_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from repl.trials import evaluate

    cases = tmp_path / "big.toml"
    cases.write_text(CASE + "# " + "x" * 200 + "\n", encoding="utf-8")
    monkeypatch.setattr(evaluate, "CASES_CAP_BYTES", 100)
    with pytest.raises(CaseFileError, match=r"big\.toml not read: it is \d+ bytes; the limit is 100"):
        load_cases(cases)


def test_brackets_inside_strings_and_comments_do_not_count(tmp_path: Path) -> None:
    deep = "[" * 100 + "{" * 100
    cases = tmp_path / "cases.toml"
    cases.write_text(
        f'[[case]]\nmessage = "{deep}"  # {deep}\ntool = ""\nanswer_contains = [\'{deep}\', """\n{deep}\n"""]\n'
        f"id = '''{deep}'''\nlang = \"\\\"{deep}\"\n", encoding="utf-8")
    (case,) = load_cases(cases)
    assert case.message == deep and case.id == deep and case.lang == '"' + deep
    assert case.answer_contains == (deep, deep + "\n")


def test_depth_is_counted_as_tomllib_nests() -> None:
    assert bracket_depth('[[case]]\nargs = { a = [1, [2]] }\n[[case]]\n', MAX_DEPTH) == 3
    assert bracket_depth("a = " + "[" * MAX_DEPTH + "]" * MAX_DEPTH, MAX_DEPTH) == MAX_DEPTH
    assert bracket_depth("a = " + "[" * 5000, MAX_DEPTH) == MAX_DEPTH + 1  # counting stops there


def test_tables_nested_by_dotted_keys_are_refused(tmp_path: Path) -> None:
    cases = tmp_path / "dotted.toml"
    cases.write_text(CASE + "args." + "a." * 5000 + "b = 1\n", encoding="utf-8")
    with pytest.raises(CaseFileError, match=f"dotted.toml not read: its tables nest deeper than {MAX_DEPTH}"):
        load_cases(cases)


def test_nesting_up_to_the_limit_is_read(tmp_path: Path) -> None:
    cases = tmp_path / "cases.toml"
    levels = MAX_DEPTH - 4  # the file, the case array, the case, args: the value's own levels
    cases.write_text(CASE.replace('tool = ""', 'tool = "t"') + "args = { a = " + "[" * levels + "]" * levels + " }\n",
                     encoding="utf-8")
    (case,) = load_cases(cases)
    assert "a" in case.args
