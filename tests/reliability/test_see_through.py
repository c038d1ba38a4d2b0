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
from tests.reliability.helpers import record, strict_json, trace_records
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
    assert json.loads(sections[2])["content"] == "second"


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
    assert parse_s < 5.0, parse_s


# ---- a trace someone sends you: every value hostile -------------------------------------

PWNED = "document.title='pwned';document.body.insertAdjacentHTML('beforeend','<p id=pwned></p>')"
EVIL = f"\"'><script>{PWNED}</script><img src=x onerror=\"{PWNED}\"><svg onload=\"{PWNED}\">"
EVIL_NAME = "x\"'><svg onload=alert(1)>"  # a file name cannot hold "/", so no closing tag
PAGE_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h4", "p", "q", "span", "div",
             "section", "details", "summary", "pre", "ul", "li"}
PAGE_ATTRS = {"lang", "charset", "http-equiv", "content", "class", "style", "data-turn", "data-step", "data-call-id"}
OUR_STYLES = re.compile(r"(left:\d+\.\d\d%;width:\d+\.\d\d%|background:#[0-9a-f]{6})")


def hostile_trace(folder: Path) -> Path:
    """A trace whose records carry a script, or a value of the wrong type, in every field the page
    shows (file name included), with its raw bodies beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{EVIL_NAME}.jsonl"
    call_ = {"call_id": EVIL, "name": EVIL}
    records = [
        {"type": "notice", "turn": EVIL, "message": EVIL, "time": EVIL},  # before the first turn
        {"type": "turn_started", "turn": EVIL, "user_text": EVIL, "time": 1.0},
        {"type": "model_request", "turn": EVIL, "step": EVIL, "time": 1.1},
        {"type": "model_usage", "step": EVIL, "latency_s": EVIL, "time": 1.5, "finish_reason": EVIL,
         "usage": {"input_tokens": EVIL, "cached_tokens": EVIL, "output_tokens": EVIL, "estimated": EVIL}},
        {"type": "tool_call_started", "step": EVIL, **call_, "arguments": {EVIL: EVIL}, "time": 1.6},
        {"type": "approval_requested", **call_, "time": 1.7},
        {"type": "approval_decided", **call_, "allowed": EVIL, "by": EVIL, "reason": EVIL, "time": 1.8},
        {"type": "tool_call_finished", **call_, "ok": False, "error_type": EVIL, "duration_s": EVIL,
         "result": {EVIL: [EVIL]}, "time": 1.9},
        {"type": "tool_call_started", "step": [EVIL], "call_id": {EVIL: 1}, "name": [EVIL], "time": 2.0},
        {"type": "guard_tripped", "guard": EVIL, "detail": EVIL, "time": 2.1},
        {"type": "error", "kind": EVIL, "message": EVIL, "time": 2.2},
        {"type": "turn_finished", "stopped_by": EVIL, "steps": EVIL, "tool_calls": EVIL, "usage": EVIL,
         "duration_s": EVIL, "time": 2.3},
        {"type": "turn_started", "turn": [EVIL], "user_text": {EVIL: EVIL}, "time": 3.0},
        {"type": "model_request", "step": {EVIL: 1}, "time": 3.1},
        {"type": "model_usage", "step": {EVIL: 1}, "usage": [EVIL], "time": 3.2},
        {"type": "turn_finished", "stopped_by": [EVIL], "usage": {"input_tokens": EVIL}, "time": 3.3},
    ]
    lines = [json.dumps(r) for r in records]
    lines.insert(3, '{"type": "model_request", "step": 2, "time": Infinity}')  # Python's json reads it
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    wire = [{"type": "wire_dropped", "records": EVIL},
            {"kind": "request", "turn": EVIL, "step": EVIL, "body": {EVIL: EVIL}},
            {"kind": "response", "turn": EVIL, "step": EVIL, "body": {EVIL: EVIL}},
            {"kind": "request", "turn": [EVIL], "step": {EVIL: 1}, "body": EVIL, "omitted_bytes": EVIL}]
    path.with_suffix(".wire").write_text("".join(json.dumps(w) + "\n" for w in wire), encoding="utf-8")
    return path


def hostile_page(home: dict[str, str], tmp_path: Path) -> Path:
    page = tmp_path / "page.html"
    made = glassloop_here("trace", str(hostile_trace(tmp_path / "sent")), "--html", str(page), env=home)
    assert made.returncode == 0 and "wrote 3 turns" in made.stdout, made
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
