"""The wire, complete (issue 20): every attempt of a model call with its method, URL, status,
the response headers that matter (secrets redacted) and body; retries linked to the call they
retried; ``--raw`` shows what each request adds to the previous one of its turn (``--full``:
whole) and pages long output through ``$PAGER`` on a terminal, in the REPL too.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from tests.fakeserver import call, fault_status, text, tool_calls
from tests.support import SECRET, glassloop_here

pytestmark = pytest.mark.timeout(60)

RATE_LIMIT = "Rate limit reached for fake-model on requests per min. Please try again in 10ms."
LIST_DOC = "List todo summaries (id, title, status, priority, due) and a count."


def chat(env: dict[str, str], base_url: str, lines: list[str]):
    return glassloop_here("--base-url", base_url, env=env, stdin="".join(f"{line}\n" for line in lines))


def wire_records(env: dict[str, str]) -> list[dict]:
    (path,) = (Path(env["XDG_STATE_HOME"]) / "glassloop" / "traces").glob("*.wire")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def session_of(result) -> str:
    return result.stdout.split("glassloop --resume ")[-1].split()[0]


def test_a_429_then_200_keeps_both_attempts_with_status_headers_and_body(fake_server, home):
    refused = replace(fault_status(429, retry_after=0.01, message=RATE_LIMIT),
                      headers=(("x-request-id", "req_first"), ("x-ratelimit-remaining-requests", "0"),
                               ("x-ratelimit-note", f"key {SECRET}"), ("set-cookie", "session=abc")))
    answered = replace(text("hello back"), headers=(("x-request-id", "req_second"),
                                                    ("x-ratelimit-remaining-requests", "59")))
    fake_server.script(refused, answered)
    result = chat(home, fake_server.base_url, ["hello", "/trace --raw"])
    assert result.returncode == 0, result.stderr
    wire = wire_records(home)
    assert SECRET not in json.dumps(wire)
    (error,) = [r["body"] for r in wire if r["kind"] == "error"]
    assert (error["attempt"], error["status"], error["retried_as"], error["method"]) == (1, 429, 2, "POST")
    assert error["url"].endswith("/v1/chat/completions") and error["response"]["error"]["message"] == RATE_LIMIT
    assert error["headers"]["x-request-id"] == "req_first" and error["headers"]["retry-after"] == "0.01"
    assert error["headers"]["x-ratelimit-remaining-requests"] == "0" and "set-cookie" not in error["headers"]
    assert error["headers"]["content-type"] == "application/json"
    (response,) = [r["body"] for r in wire if r["kind"] == "response"]
    http = response["http"]
    assert (http["attempt"], http["status"], http["method"]) == (2, 200, "POST") and response["content"] == "hello back"
    assert http["headers"]["x-request-id"] == "req_second" and http["headers"]["content-type"] == "text/event-stream"
    assert http["events"] >= 3 and 0 <= http["first_event_s"] <= http["last_event_s"]
    # the REPL's /trace --raw and glassloop trace ID --raw show both attempts
    for shown in (result.stdout, glassloop_here("trace", session_of(result), "--raw", env=home).stdout):
        assert SECRET not in shown
        headings = re.findall(r"^── (.*)$", shown, flags=re.M)
        assert headings == ["turn 1 · model call 1 · request, as sent",
                            "turn 1 · model call 1 · attempt 1 failed: HTTP 429, retried as attempt 2",
                            "turn 1 · model call 1 · response, as assembled from the stream"], shown
        flat = " ".join(shown.split())
        assert re.search(r"POST http://127\.0\.0\.1:\d+/v1/chat/completions → 429 · [\d.]+ s after sending", flat)
        assert re.search(r"attempt 2 · POST http://127\.0\.0\.1:\d+/v1/chat/completions → 200 · \d+ stream events",
                         flat)
        assert '"x-request-id": "req_first"' in flat and '"x-request-id": "req_second"' in flat
        assert RATE_LIMIT in flat and '"x-ratelimit-remaining-requests": "0"' in flat


def three_step_turn(fake_server, home):
    fake_server.script(tool_calls(call("list_todos", {})), tool_calls(call("get_todo", {"todo_id": "1"})),
                       text("Todo 1 is open."))
    result = chat(home, fake_server.base_url, ["what is todo 1?"])
    assert result.returncode == 0, result.stderr
    return session_of(result)


def test_the_default_raw_view_of_a_3_step_turn_shows_each_tool_schema_once(fake_server, home):
    session = three_step_turn(fake_server, home)
    shown = glassloop_here("trace", session, "--raw", env=home).stdout
    assert shown.count(LIST_DOC) == 1, shown
    assert re.findall(r"^── (.*request.*)$", shown, flags=re.M) == [
        "turn 1 · model call 1 · request, as sent",
        "turn 1 · model call 2 · request, what is new since model call 1",
        "turn 1 · model call 3 · request, what is new since model call 2"]
    later = shown.split("what is new since model call 1", 1)[1]
    assert re.search(r"^tools: unchanged \(\d+: .*list_todos.*\)$", later, flags=re.M)
    assert "messages: the first 2 as before, 2 appended:" in later  # the answer's call and its result
    assert "messages: the first 4 as before, 2 appended:" in later
    unchanged = re.findall(r"^unchanged: (.*)$", later, flags=re.M)
    assert len(unchanged) == 2 and {"model", "stream", "stream_options"} <= set(unchanged[0].split(", "))
    appended = json.loads(later.split("2 appended:\n", 1)[1].split("\ntools:", 1)[0])
    assert appended == fake_server.chat_requests()[1].body["messages"][2:]
    full = glassloop_here("trace", session, "--raw", "--full", env=home).stdout
    assert full.count(LIST_DOC) == 3 and "what is new" not in full
    (as_json,) = [json.loads(glassloop_here("trace", session, "--raw", "--json", env=home).stdout)]
    assert [c["request"] for c in as_json] == [r.body for r in fake_server.chat_requests()]  # --json: whole


def test_a_changed_tool_list_is_shown_by_name():
    from repl.tracing.raw import request_changes

    first = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
             "tools": [{"type": "function", "function": {"name": "a", "description": "one"}},
                       {"type": "function", "function": {"name": "b", "description": "two"}}]}
    second = {"model": "m", "messages": [*first["messages"], {"role": "assistant", "content": "x"}],
              "tools": [{"type": "function", "function": {"name": "a", "description": "ONE"}},
                        {"type": "function", "function": {"name": "c", "description": "three"}}],
              "temperature": 0.2}
    blocks = request_changes(first, second)
    assert ("note", "tools: 0 unchanged, 1 changed, 1 added, 1 removed (b):") in blocks
    assert ("json", [second["tools"][0], second["tools"][1]]) in blocks
    assert ("note", "temperature: new:") in blocks and ("note", "unchanged: model") in blocks


def test_repl_pages_a_long_raw_view_through_PAGER(sized_repl, fake_server, home, tmp_path):
    paged = tmp_path / "paged.txt"
    home["PAGER"] = f"sh -c 'cat > {paged}'"
    fake_server.script(tool_calls(call("list_todos", {})), text("Two are open."))
    repl = sized_repl(cols=100, rows=24)
    repl.say("what is open?")
    repl.expect("Two are open")
    repl.ready()
    repl.say("/trace --raw")
    repl.ready()
    repl.close()
    text_paged = paged.read_text(encoding="utf-8")
    assert "turn 1 · model call 2 · request, what is new since model call 1" in text_paged
    assert "\x1b[" in text_paged  # the colours go to the pager (less -R keeps them)
    assert "what is new since" not in repl.screen()  # shown by the pager, not printed


def test_the_pager_is_used_only_for_output_taller_than_the_screen(tmp_path, monkeypatch):
    from repl.ui.pager import page, pager_command

    paged = tmp_path / "paged.txt"
    monkeypatch.setenv("PAGER", f"sh -c 'cat > {paged}'")
    assert not page("one\ntwo\n", height=24) and not paged.exists()
    assert page("line\n" * 30, height=24) and paged.read_text() == "line\n" * 30
    monkeypatch.setenv("PAGER", "")
    assert pager_command() == [] and not page("line\n" * 30, height=24)
    monkeypatch.setenv("PAGER", "/no/such/pager")
    assert not page("line\n" * 30, height=24)  # printed instead
    monkeypatch.delenv("PAGER")
    assert pager_command() == ["less", "-R"]


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_the_request_body_step_mode_shows_is_the_one_sent(fake_server, api):
    from tests.fake_responses import install
    from tests.support import QUESTION, TODO_TOOLS, adapter, stream_all

    install(fake_server)
    p = adapter(api, fake_server.base_url, temperature=0.3)
    fake_server.script(text("sent"))
    shown = p.request_body(QUESTION, TODO_TOOLS)
    stream_all(p)
    p.close()
    assert shown == fake_server.requests_to(api)[0].body


def test_an_answer_that_breaks_off_is_kept_as_a_failed_attempt_with_what_came(fake_server, home):
    from tests.fakeserver import cut_stream_after

    fake_server.script(cut_stream_after(4, text("partial answer here", chunk_size=4)))
    result = chat(home, fake_server.base_url, ["hello", "/trace --raw"])
    assert result.returncode == 0, result.stderr
    (error,) = [r["body"] for r in wire_records(home) if r["kind"] == "error"]
    assert (error["attempt"], error["status"], error["retried_as"]) == (1, 200, None)
    assert error["response"] == {"content": "partial answ", "events": 4} and "dropped mid-answer" in error["reason"]
    flat = " ".join(result.stdout.split())
    assert re.search(r"── turn 1 · model call 1 · attempt 1 failed: .*dropped mid-answer.*, the call failed", flat)
    assert re.search(r"POST http://127\.0\.0\.1:\d+/v1/chat/completions → 200 · [\d.]+ s after sending", flat)
    assert "(none: the call failed" not in flat
