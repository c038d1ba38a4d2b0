"""See through the loop: the exact wire traffic and the timelines (issue 15).

The raw request body of every model call is recorded exactly as the scripted
server received it (beside the trace, capped per session, oldest bodies dropped
first, events always kept); ``/trace --raw``, ``--save`` and ``glassloop trace
ID --raw`` show it; ``/trace`` draws a turn as a timeline on a shared time axis
(two concurrent read-only tools overlap, the approval wait is drawn apart) that
fits 80 columns; ``/usage`` draws per-turn bars; ``glassloop trace ID --html``
writes one self-contained page with every turn, call and result.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.fakeserver import call, fault_status, text, tool_calls
from tests.reliability.helpers import (
    EVIL,
    EVIL_NAME,
    PWNED,
    hostile_trace,
    record,
    strict_json,
    trace_records,
)
from tests.support import SECRET, glassloop_here

SLOW_TOOL = """import time

from glassloop_tools import tool


@tool
def slow_lookup(city: str) -> dict:
    \"\"\"Look a city up, slowly.

    Args:
        city: the city
    \"\"\"
    time.sleep(0.3)
    return {"city": city, "found": True}
"""

pytestmark = pytest.mark.timeout(60)


def chat(env: dict[str, str], base_url: str, lines: list[str], *extra: str):
    return glassloop_here("--base-url", base_url, *extra, env=env, stdin="".join(f"{line}\n" for line in lines))


def trace_folder(env: dict[str, str]) -> Path:
    return Path(env["XDG_STATE_HOME"]) / "glassloop" / "traces"


def wire_lines(env: dict[str, str]) -> list[dict]:
    (path,) = trace_folder(env).glob("*.wire")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_raw_bodies_are_what_the_server_received(fake_server, home):
    fake_server.script(tool_calls(call("list_todos", {})), text("two open"))
    result = chat(home, fake_server.base_url, ["what is open?"])
    assert result.returncode == 0, result.stderr
    wire = wire_lines(home)
    requests = [r for r in wire if r["kind"] == "request"]
    responses = [r for r in wire if r["kind"] == "response"]
    assert [r["body"] for r in requests] == [r.body for r in fake_server.chat_requests()]
    assert [(r["turn"], r["step"]) for r in requests] == [(1, 1), (1, 2)]
    assert responses[0]["body"]["tool_calls"][0]["name"] == "list_todos"
    assert responses[0]["body"]["finish_reason"] == "tool_calls" and responses[1]["body"]["content"] == "two open"
    assert not [r for r in trace_records(home) if r.get("type") == "wire"]  # bodies stay out of the trace


def test_raw_body_of_text_tool_calls_and_of_a_refused_request(fake_server, home, tmp_path):
    config = tmp_path / "text.toml"
    config.write_text('[providers.openai]\ntool_call_format = "text"\n', encoding="utf-8")
    fake_server.script(text('<tool_call>{"name": "list_todos", "arguments": {}}</tool_call>'), text("Two open."),
                       fault_status(400, message="no such model"))
    result = chat(home, fake_server.base_url, ["what is open?", "again", "/trace --raw"], "--config", str(config))
    assert result.returncode == 0, result.stderr
    wire = wire_lines(home)
    requests = [r for r in wire if r["kind"] == "request"]
    assert [r["body"] for r in requests] == [r.body for r in fake_server.requests]  # also the refused one
    first = requests[0]["body"]
    assert "tools" not in first and "list_todos" in first["messages"][0]["content"]  # the text transform, as sent
    answer = next(r["body"] for r in wire if r["kind"] == "response")
    assert answer["content"].startswith("<tool_call>") and answer["tool_calls"][0]["name"] == "list_todos"
    assert [r["turn"] for r in wire if r["kind"] == "response"] == [1, 1]  # the refused call got no answer
    assert "attempt 1 failed: HTTP 400, the call failed" in result.stdout and '"no such model"' in result.stdout


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_failed_attempts_are_kept_with_the_servers_answer(fake_server, home, api):
    said = f"Rate limit reached for fake-model on requests per min; key {SECRET} is throttled."
    fake_server.script(*[fault_status(429, retry_after=0.01, message=said)] * 3)
    result = chat(home, fake_server.base_url, ["hello", "/trace --raw"], "--api", api)
    assert result.returncode == 0, result.stderr
    shown = " ".join((result.stdout + result.stderr).split())  # the terminal wraps long lines
    assert "rate limited (HTTP 429) after 2 retries: Rate limit reached for fake-model on requests per min" in shown
    (path,) = trace_folder(home).glob("*.wire")
    assert SECRET not in shown and SECRET not in path.read_text(encoding="utf-8")
    errors = [r["body"] for r in wire_lines(home) if r["kind"] == "error"]
    assert [(e["attempt"], e["status"], e["retried_as"]) for e in errors] == [(1, 429, 2), (2, 429, 3), (3, 429, None)]
    assert all(e["response"]["error"]["message"].startswith("Rate limit reached for fake-model") for e in errors)
    assert "attempt 1 failed: HTTP 429, retried as attempt 2" in shown
    assert "attempt 3 failed: HTTP 429, the call failed" in shown and "(none: the call failed" not in shown
    session_id = next(trace_folder(home).glob("*.jsonl")).stem  # a turn that failed leaves no journal
    as_json = glassloop_here("trace", session_id, "--raw", "--json", env=home)
    (failed_call,) = json.loads(as_json.stdout)
    assert failed_call["request"] == fake_server.requests_to(api)[0].body and failed_call["response"] is None
    assert [a["status"] for a in failed_call["failed_attempts"]] == [429, 429, 429]
    text_view = glassloop_here("trace", session_id, "--raw", env=home).stdout
    assert re.findall(r"^── (.*)$", text_view, flags=re.M) == [
        "turn 1 · model call 1 · request, as sent",
        "turn 1 · model call 1 · attempt 1 failed: HTTP 429, retried as attempt 2",
        "turn 1 · model call 1 · attempt 2 failed: HTTP 429, retried as attempt 3",
        "turn 1 · model call 1 · attempt 3 failed: HTTP 429, the call failed"]


def test_raw_bodies_are_capped_oldest_first_and_events_kept(fake_server, home, tmp_path):
    config = tmp_path / "cap.toml"
    config.write_text("[trace]\nraw_max_kb = 24\n", encoding="utf-8")
    questions = [f"question {n}" for n in range(1, 7)]
    fake_server.script(*[text(f"answer {n}") for n in range(1, 7)])
    result = chat(home, fake_server.base_url, questions, "--config", str(config))
    assert result.returncode == 0, result.stderr
    (path,) = trace_folder(home).glob("*.wire")
    size = path.stat().st_size
    wire = wire_lines(home)
    assert size <= 24 * 1024
    assert wire[0]["type"] == "wire_dropped" and wire[0]["records"] >= 2
    kept = [r for r in wire[1:] if r["kind"] == "request"]
    assert kept[-1]["body"] == fake_server.chat_requests()[-1].body  # the newest stay
    assert kept[0]["turn"] > 1  # the oldest went first
    started = [r["user_text"] for r in trace_records(home) if r["type"] == "turn_started"]
    assert started == questions  # every event is kept
    record("see_through", case="raw cap", cap_bytes=24 * 1024, file_bytes=size,
           dropped=wire[0]["records"], kept=len(wire) - 1)


def test_raw_bodies_can_be_turned_off(fake_server, home, tmp_path):
    config = tmp_path / "off.toml"
    config.write_text("[trace]\nraw = false\n", encoding="utf-8")
    fake_server.script(text("fine"))
    result = chat(home, fake_server.base_url, ["hello"], "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert list(trace_folder(home).glob("*.jsonl")) and not list(trace_folder(home).glob("*.wire"))


def slow_tool_file(tmp_path: Path) -> Path:
    path = tmp_path / "slow_tools.py"
    path.write_text(SLOW_TOOL, encoding="utf-8")
    return path


def tool_turn():
    """Two read-only calls that run together (0.3 s each), then one that asks for approval."""
    return (tool_calls(call("slow_lookup", {"city": "Paris"}), call("slow_lookup", {"city": "Berlin"}),
                       call("add_todo", {"title": "pack the bags"})),
            text("Both found; the todo is added."))


def cells(line: str, cell: str) -> set[int]:
    return {i for i, ch in enumerate(line) if ch == cell}


def test_timeline_at_80_columns_overlaps_concurrent_tools(sized_repl, fake_server, tmp_path):
    fake_server.script(*tool_turn())
    repl = sized_repl("--tools", str(slow_tool_file(tmp_path)), cols=80)
    repl.say("look up Paris and Berlin, and add a todo")
    repl.expect("Allow")
    time.sleep(0.4)  # the person thinks it over: the wait is drawn apart from the run
    repl.key("y")
    repl.expect("the todo is added")
    repl.ready()
    repl.say("/trace")
    repl.expect("turn end: stopped_by answer")
    repl.ready()
    shown = repl.screen().rsplit("/trace", 1)[-1]
    lines = [line.rstrip() for line in shown.replace("\r", "").split("\n")]
    models = [line for line in lines if line.startswith("model ")]
    tools = [line for line in lines if line.startswith("  slow_lookup")]
    todo = next(line for line in lines if line.startswith("  add_todo"))
    assert len(models) == 2 and len(tools) == 2, shown
    assert all(re.search(r"in [\d,]+ \([\d,]+ cached\) out [\d,]+$", m) for m in models), models
    assert all(re.search(r"ok \d+ ms$", t) for t in tools), tools  # each row whole on one line
    first, second = (cells(t, "▓") for t in tools)
    assert first and second and len(first & second) >= 0.8 * min(len(first), len(second))  # they overlap
    waited, ran = cells(todo, "░"), cells(todo, "▓")
    assert waited and ran and max(waited) < min(ran) and "waited" in todo  # the wait, then the run
    assert min(waited) >= max(first | second) - 1  # asked once the read-only calls were done
    assert cells(models[1], "█") and min(cells(models[1], "█")) >= max(ran) - 1  # the answer came after
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert "░ waiting for approval" in shown
    repl.close()
    record("see_through", case="timeline at 80 columns", tool_cells=[len(first), len(second)],
           overlap=len(first & second), wait_cells=len(waited))


def test_trace_raw_shows_and_saves_what_the_server_received(sized_repl, fake_server, tmp_path):
    fake_server.script(tool_calls(call("list_todos", {})), text("Two are open."))
    repl = sized_repl(cols=100)
    repl.say("what is open?")
    repl.expect("Two are open")
    repl.ready()
    repl.say("/trace --raw")
    repl.expect("model call 2 · response")
    repl.ready()
    shown = repl.screen().rsplit("/trace --raw", 1)[-1]
    assert "turn 1 · model call 1 · request, as sent" in shown and '"what is open?"' in shown
    assert '"stream_options"' in shown and '"finish_reason": "tool_calls"' in shown
    saved = tmp_path / "raw.json"
    repl.say(f"/trace 1 --raw --save {saved}")
    repl.expect("saved 2 model calls")
    repl.ready()
    repl.close()
    calls = json.loads(saved.read_text(encoding="utf-8"))
    assert [c["request"] for c in calls] == [r.body for r in fake_server.chat_requests()]
    assert calls[1]["response"]["content"] == "Two are open."


def test_glassloop_trace_raw_of_a_saved_session(fake_server, home):
    fake_server.script(tool_calls(call("list_todos", {})), text("first"), text("second"))
    result = chat(home, fake_server.base_url, ["what is open?", "and now?"])
    session_id = result.stdout.split("glassloop --resume ")[-1].split()[0]
    as_json = glassloop_here("trace", session_id, "--raw", "--turn", "1", "--json", env=home)
    assert as_json.returncode == 0, as_json.stderr
    calls = json.loads(as_json.stdout)
    assert [c["request"] for c in calls] == [r.body for r in fake_server.chat_requests()[:2]]
    shown = glassloop_here("trace", session_id, "--raw", "--turn", "2", env=home)
    sections = re.split(r"^── .*$", shown.stdout, flags=re.M)
    assert re.findall(r"^── (.*)$", shown.stdout, flags=re.M) == [
        "turn 2 · model call 1 · request, as sent", "turn 2 · model call 1 · response, as assembled from the stream"]
    assert json.loads(sections[1]) == fake_server.chat_requests()[2].body
    response = sections[2].split("\n", 2)  # the heading's end, the exchange's line, the JSON
    assert response[1].startswith("attempt 1 · POST http://127.0.0.1:") and " → 200 · " in response[1]
    assert json.loads(response[2])["content"] == "second"


def test_usage_draws_cached_and_uncached_input_per_turn(fake_server, home):
    fake_server.prefix_cache = True
    fake_server.script(text("one"), text("two"), text("three"))
    result = chat(home, fake_server.base_url, ["first question", "second", "third", "/usage"])
    assert result.returncode == 0, result.stderr
    chart = result.stdout.split("tokens per turn", 1)[1].splitlines()
    bars = {line.split()[0]: line for line in chart[1:4]}
    assert set(bars) == {"1", "2", "3"}
    assert "░" not in bars["1"] and "▒" in bars["1"]  # the first request has nothing cached
    assert "░" in bars["2"] and "░" in bars["3"] and "█" in bars["3"]
    assert re.search(r"session: [\d,]+ tokens \([\d,]+ in, [\d,]+ of them cached; [\d,]+ out\) · \$", result.stdout)


class PageParser(HTMLParser):
    """What the page holds: turns, model and tool calls with their texts, every tag and attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.turns: list[str] = []
        self.models: list[tuple[str, str]] = []  # (turn, step)
        self.tools: list[str] = []
        self.pres: dict[str, list[str]] = {}
        self._turn = ""
        self._pre: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "section":
            self._turn = a.get("data-turn") or ""
            self.turns.append(self._turn)
        elif tag == "details" and a.get("class") == "model-call":
            self.models.append((self._turn, a.get("data-step") or ""))
        elif tag == "details" and a.get("class") == "tool-call":
            self.tools.append(a.get("data-call-id") or "")
        elif tag == "pre":
            self._pre = a.get("class") or ""
            self.pres.setdefault(self._pre, []).append("")

    def handle_endtag(self, tag):
        if tag == "pre":
            self._pre = None

    def handle_data(self, data):
        if self._pre is not None:
            self.pres[self._pre][-1] += data


def test_html_page_holds_every_turn_call_and_result(fake_server, home, tmp_path):
    fake_server.script(*tool_turn(), text("Plain answer <b>not bold</b>"))
    result = chat(home, fake_server.base_url, ["look up Paris and Berlin", "and then?"],
                  "--tools", str(slow_tool_file(tmp_path)), "--yes")
    assert result.returncode == 0, result.stderr
    session_id = result.stdout.split("glassloop --resume ")[-1].split()[0]
    page = tmp_path / "trace.html"
    made = glassloop_here("trace", session_id, "--html", str(page), env=home)
    assert made.returncode == 0 and "wrote 2 turns" in made.stdout, made
    parsed = PageParser()
    started = time.monotonic()
    parsed.feed(page.read_text(encoding="utf-8"))
    records = trace_records(home)
    turns = [str(r["turn"]) for r in records if r["type"] == "turn_started"]
    assert parsed.turns == turns == ["1", "2"]
    assert parsed.models == [(str(r["turn"]), str(r["step"])) for r in records if r["type"] == "model_request"]
    assert [json.loads(t) for t in parsed.pres["request"]] == [r.body for r in fake_server.chat_requests()]
    assert json.loads(parsed.pres["response"][-1])["content"] == "Plain answer <b>not bold</b>"  # escaped, kept
    finished = [r for r in records if r["type"] == "tool_call_finished"]
    assert parsed.tools == [r["call_id"] for r in finished] and len(finished) == 3
    assert [json.loads(t) for t in parsed.pres["result"]] == [r["result"] for r in finished]
    assert [json.loads(t) for t in parsed.pres["arguments"]] == [
        r["arguments"] for r in records if r["type"] == "tool_call_started"]
    # self-contained: no script, no link, nothing fetched
    assert not [t for t, a in parsed.tags if t in ("script", "link", "img", "iframe") or {"src", "href"} & a.keys()]
    assert "url(" not in page.read_text(encoding="utf-8") and "<b>not bold</b>" not in page.read_text(encoding="utf-8")
    parse_s = time.monotonic() - started
    record("see_through", case="html page", bytes=page.stat().st_size, turns=len(parsed.turns),
           model_calls=len(parsed.models), tool_calls=len(parsed.tools),
           parse_ms=round(parse_s * 1000, 1))


# ---- a trace someone sends you: every value hostile -------------------------------------

PAGE_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h4", "p", "q", "span", "div",
             "section", "details", "summary", "pre", "ul", "li"}
PAGE_ATTRS = {"lang", "charset", "http-equiv", "content", "class", "style", "title", "data-turn", "data-step",
              "data-call-id"}
OUR_STYLES = re.compile(r"(left:\d+\.\d\d%;width:\d+\.\d\d%|background:#[0-9a-f]{6})")


def hostile_page(home: dict[str, str], tmp_path: Path) -> Path:
    page = tmp_path / "page.html"
    made = glassloop_here("trace", str(hostile_trace(tmp_path / "sent")), "--html", str(page), env=home)
    assert made.returncode == 0 and "wrote 2 turns" in made.stdout, made  # a notice before the first is no turn
    return page


class TextParser(PageParser):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []

    def handle_data(self, data):
        super().handle_data(data)
        self.text.append(data)


def test_a_hostile_trace_becomes_a_page_of_text(home, tmp_path):
    page = hostile_page(home, tmp_path).read_text(encoding="utf-8")
    parsed = TextParser()
    parsed.feed(page)
    assert {tag for tag, _ in parsed.tags} <= PAGE_TAGS
    assert {name for _, attrs in parsed.tags for name in attrs} <= PAGE_ATTRS
    values = {name: [a[name] for _, a in parsed.tags if name in a] for name in PAGE_ATTRS}
    assert values["data-step"] and all(v and v.isdigit() for v in values["data-step"])  # numbers, coerced
    assert parsed.turns == ["0", "0", "0"]
    assert all(OUR_STYLES.fullmatch(v or "") for v in values["style"])
    assert EVIL in values["data-call-id"]  # escaped, not dropped: the attribute reads back as the value
    shown = "".join(parsed.text)
    assert shown.count(EVIL) >= 10 and EVIL_NAME in shown
    assert not re.search(r"<(script|img|svg)", page)
    head = [tag for tag, _ in parsed.tags][:4]
    assert head == ["html", "head", "meta", "meta"]
    csp = parsed.tags[3][1]
    assert csp["http-equiv"] == "Content-Security-Policy"
    assert "default-src 'none'" in (csp["content"] or "") and "script" not in (csp["content"] or "")


CHROMIUM = shutil.which("chromium")


def rendered(page: Path, tmp_path: Path) -> str:
    """The page's DOM after a headless Chromium loaded it and ran what it was allowed to run."""
    result = subprocess.run(
        [CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'chromium'}",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "</html>" in result.stdout, result.stderr[-2000:]
    return result.stdout


def scripts_ran(dom: str) -> bool:
    return "<title>pwned</title>" in dom or 'id="pwned"' in dom


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")
@pytest.mark.timeout(400)
def test_a_hostile_trace_page_runs_no_script_in_a_browser(home, tmp_path):
    page = hostile_page(home, tmp_path)
    assert not scripts_ran(rendered(page, tmp_path))
    text = page.read_text(encoding="utf-8")
    planted = tmp_path / "planted.html"  # a script the escaping missed: the page's policy still stops it
    planted.write_text(text.replace("<body>", f"<body><script>{PWNED}</script><img src=x onerror=\"{PWNED}\">", 1),
                       encoding="utf-8")
    assert not scripts_ran(rendered(planted, tmp_path))
    bare = tmp_path / "bare.html"  # the same page without its policy: the browser runs it (the check can fail)
    bare.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", planted.read_text("utf-8")),
                    encoding="utf-8")
    assert scripts_ran(rendered(bare, tmp_path))


def test_a_trace_read_back_as_json_is_json(home, tmp_path):
    """Python's json reads ``Infinity`` in a trace line; what ``trace --json`` prints is JSON any parser reads."""
    path = hostile_trace(tmp_path / "sent")
    shown = glassloop_here("trace", str(path), "--turn", "all", "--json", env=home)
    assert shown.returncode == 0, shown
    records = [strict_json(line) for line in shown.stdout.splitlines()]
    assert {"type": "model_request", "step": 2, "time": "Infinity"} in records


# ---- the terminal views of a hostile or damaged trace -----------------------------------

TERMINAL_CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e")  # ESC, BEL, 8-bit CSI, a bidi override
TRACE_VIEWS = {"timelines": [], "events": ["--events"], "all turns": ["--turn", "all", "--events"],
               "raw": ["--turn", "all", "--raw"], "json": ["--turn", "all", "--json"],
               "raw json": ["--turn", "all", "--raw", "--json"]}


def shown_as_text(result) -> str:
    """The output of a trace view that must have worked: exit 0, no traceback, no terminal control."""
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "Traceback" not in out, out[-3000:]
    assert [c for c in TERMINAL_CONTROLS if c in out] == [], out[-3000:]
    return result.stdout


@pytest.mark.parametrize("view", TRACE_VIEWS)
def test_a_hostile_trace_is_text_in_every_terminal_view(home, tmp_path, view):
    path = hostile_trace(tmp_path / "sent")
    shown = shown_as_text(glassloop_here("trace", str(path), *TRACE_VIEWS[view], env=home))
    if view == "json":
        assert len([strict_json(line) for line in shown.splitlines()]) == 17
    elif view == "raw json":
        assert json.loads(shown)[0]["request"] == {EVIL: EVIL}
    else:
        assert "<script>document.title='pwned'" in shown  # the text is shown, as text
    if view == "all turns":
        assert shown.count("turn end: stopped_by") == 2 and "call" in shown and "result" in shown


def test_a_hostile_trace_in_the_repl_trace_views(fake_server, home, tmp_path):
    fake_server.script(text("fine"))
    first = chat(home, fake_server.base_url, ["hello"])
    assert first.returncode == 0, first.stderr
    session_id = first.stdout.split("glassloop --resume ")[-1].split()[0]
    sent = hostile_trace(tmp_path / "sent")
    own = trace_folder(home) / f"{session_id}.jsonl"
    for theirs, ours in ((sent, own), (sent.with_suffix(".wire"), own.with_suffix(".wire"))):
        with ours.open("a", encoding="utf-8") as file:
            file.write(theirs.read_text(encoding="utf-8"))
    views = ["/trace all", "/trace all --events", "/trace all --raw", "/trace all --json", "/trace 1"]
    shown = shown_as_text(chat(home, fake_server.base_url, views, "--resume", session_id))
    assert shown.count("turn end: stopped_by") >= 4 and "<script>document.title='pwned'" in shown


BAD_VALUES: dict[str, object] = {
    "null": None, "true": True, "list": [1, "two", None], "dict": {"k": [None]}, "empty": "",
    "huge int": 10**400, "huge float": -1e308, "NaN": float("nan"), "NaN string": "NaN",
    "script": "<script>alert(1)</script>", "lone surrogate": "\ud800",
    "escapes": "\x1b]0;pwned\x07\x1b[2J\x9b31mred\u202eevil\nnext line",
    "deep": json.loads("[" * 200 + "]" * 200),
}


def every_field_made(records: list[dict], bad: object, *, whole: bool = True) -> list[dict]:
    """``records`` again once per field of each record (and per field of its usage), with that
    one field made ``bad``; ``whole``: each time with the records around it, else the record alone."""
    out: list[dict] = []
    for i, r in enumerate(records):
        for key, value in r.items():
            for inner in [None, *value] if key == "usage" and isinstance(value, dict) else [None]:
                copy = json.loads(json.dumps(records))
                if inner is None:
                    copy[i][key] = bad
                else:
                    copy[i][key][inner] = bad
                out += copy if whole else copy[i : i + 1]
    return out


@pytest.mark.timeout(300)
def test_every_field_of_a_real_trace_made_wrong_shows_no_traceback(fake_server, home, tmp_path):
    from repl.tracing.timeline import chosen_turns, draw_turn
    from repl.tracing.trace import turns

    fake_server.script(fault_status(429, retry_after=0.01), *tool_turn(), fault_status(400, message="bad request"))
    made = chat(home, fake_server.base_url, ["look up Paris and Berlin", "and then?"],
                "--tools", str(slow_tool_file(tmp_path)), "--yes")
    assert made.returncode == 0, made.stderr
    (real,) = trace_folder(home).glob("*.jsonl")
    records = [json.loads(line) for line in real.read_text(encoding="utf-8").splitlines()]
    wire = wire_lines(home)
    kinds = {r["type"] for r in records}
    assert {"model_retry", "approval_decided", "tool_call_finished", "error", "turn_finished"} <= kinds, kinds
    sent = tmp_path / "sent"
    sent.mkdir()
    runs = 0
    for name, bad in BAD_VALUES.items():
        path = sent / f"{name.replace(' ', '-')}.jsonl"
        wrong = [r for turn in turns(records) for r in every_field_made(turn, bad)]  # each with its own turn
        path.write_text("".join(json.dumps(r) + "\n" for r in wrong), encoding="utf-8")
        wrong_wire = wire + every_field_made(wire, bad, whole=False)  # raw bodies are big: each alone
        path.with_suffix(".wire").write_text("".join(json.dumps(w) + "\n" for w in wrong_wire), encoding="utf-8")
        for view in (TRACE_VIEWS[v] for v in ("all turns", "raw", "json")):  # the others read the same
            shown = shown_as_text(glassloop_here("trace", str(path), *view, env=home))
            assert shown.strip(), (name, view)
            runs += 1
        for group in chosen_turns(path, "all"):  # /trace's timeline
            lines = draw_turn(group, 80)
            assert all(len(line) <= 80 for line in lines), (name, lines)
            assert not [line for line in lines if any(c in line for c in TERMINAL_CONTROLS)], (name, lines)
    record("see_through", case="every field of a trace made wrong", records=len(records), wire=len(wire),
           values=len(BAD_VALUES), runs=runs)


def test_damaged_lines_of_a_trace_are_skipped(home, tmp_path):
    from repl.tracing.timeline import chosen_turns, draw_turn

    path = tmp_path / "damaged.jsonl"
    good = [{"type": "turn_started", "turn": 1, "user_text": "still here", "time": -1e308},
            {"type": "model_request", "step": 1, "time": 1e308},  # too far apart for a float's difference
            {"type": "turn_finished", "stopped_by": "answer", "steps": 1, "tool_calls": 0, "time": 2.0}]
    damaged = [b"[1, 2]", b'"a string"', b"null", b'{"type": "model_req', b"[" * 100_000, b"\xff\xfe\x00garbage",
               b'{"type": "error", "message": "\x1b]0;pwned\x07"}']
    path.write_bytes(b"\n".join([json.dumps(good[0]).encode(), *damaged, *(json.dumps(r).encode() for r in good[1:])])
                     + b"\n")
    for view in TRACE_VIEWS.values():
        shown = shown_as_text(glassloop_here("trace", str(path), *view, env=home))
        assert shown.strip() or "--raw" in view  # no raw records: one line on stderr says so
    events = shown_as_text(glassloop_here("trace", str(path), env=home))
    assert "turn 1: 'still here'" in events and "turn end: stopped_by answer" in events
    (turn,) = chosen_turns(path, "all")
    assert [line for line in draw_turn(turn) if line.startswith("model 1")]


def test_a_trace_that_cannot_be_read_is_one_line(home, tmp_path):
    if not Path("/proc/self/mem").is_file():
        pytest.skip("no /proc/self/mem here")
    path = tmp_path / "unreadable.jsonl"
    path.symlink_to("/proc/self/mem")  # a file whose every read fails (EIO), as root too
    for view in TRACE_VIEWS.values():
        result = glassloop_here("trace", str(path), *view, env=home)
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.count("\n") == 1 and "unreadable.jsonl" in result.stderr, result.stderr


def test_the_sessions_own_trace_unreadable_is_one_line_at_trace(session, fake_server) -> None:
    """``/trace`` and ``/trace --raw`` when the session's trace (or its raw calls) can no longer
    be read (here: a link to a file every read of which fails, even as root)."""
    from repl.session import commands
    from repl.tracing.trace import wire_path

    fake_server.script(text("hello"))
    session.ask("hi")
    assert session.trace is not None and session.trace.path.exists()
    for path in (session.trace.path, wire_path(session.trace.path)):
        path.unlink(missing_ok=True)
        path.symlink_to("/proc/self/mem")
    for line in ("/trace", "/trace --raw"):
        commands.dispatch(session, line)
    assert len(session.ui.errors) == 2 and all(e.startswith("cannot read the trace") for e in session.ui.errors[:1])
    assert session.ui.errors[1].startswith("cannot read the ")
