"""Item 3: secrets in pieces, in the input history and in URLs.

The scripted model echoes the API key in 3-character text deltas. Redacting
each delta on its own finds nothing, and joining the stored pieces gives the
key back; so every file and output is checked twice: the key is in no file
as a whole, and it is not in the concatenation of all the text a reader
could stitch together (every string of every record, in order, and the text
records alone). The key here is a plain string (not ``sk-`` shaped): it is
found because the configuration names it (``OPENAI_API_KEY``), not by shape.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.fakeserver import call, text, tool_calls
from tests.reliability.helpers import record
from tests.support import glassloop_here

KEY = "glKey0123456789PlainSecretZZ"
TYPED_SHAPED = "sk-typedButUnknown0123456789"  # not configured: caught by its shape
BAD_URL = "http://user:secret@127.0.0.1:1/v1?api-key=xyz"  # unreachable: port 1
pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def keyed(home):
    home["OPENAI_API_KEY"] = KEY
    return home


def leaves(value: Any) -> list[str]:
    """Every string (dict keys too) of a JSON value, in document order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *leaves(v)]]
    if isinstance(value, list):
        return [s for item in value for s in leaves(item)]
    return []


def stitchable(records: list[Any]) -> list[str]:
    """Texts a reader could join to rebuild a streamed key: all strings, text records alone."""
    texts = [r["text"] for r in records if isinstance(r, dict) and r.get("type") == "text_delta"]
    return ["".join(s for r in records for s in leaves(r)), "".join(texts)]


def assert_no_key(name: str, raw: str, records: list[Any] | None = None) -> None:
    assert KEY not in raw, f"{name} holds the key"
    for joined in stitchable(records or []):
        assert KEY not in joined, f"{name}: the key comes back by joining its pieces"


def jsonl(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def echo_script() -> list:
    return [tool_calls(call("list_todos", {}), text=f"checking {KEY} first", chunk_size=3),
            text(f"your key is {KEY}, keep it safe", chunk_size=3)]


def test_ask_json_and_trace_hold_no_streamed_key(fake_server, keyed, tmp_path):
    fake_server.script(*echo_script())
    trace_file = tmp_path / "t.jsonl"
    result = glassloop_here("ask", "echo my key", "--json", "--base-url", fake_server.base_url,
                            "--trace-file", str(trace_file), env=keyed)
    assert result.returncode == 0, result.stderr
    assert fake_server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # the key was used
    payload = json.loads(result.stdout)
    assert "[redacted]" in payload["answer"]
    assert_no_key("ask --json", result.stdout + result.stderr, [payload, *payload["trace"]])
    records = jsonl(trace_file)
    assert_no_key("trace file", trace_file.read_text(encoding="utf-8"), records)
    # one text record per model call, holding the whole (redacted) text
    assert [(r["step"], r["text"]) for r in records if r["type"] == "text_delta"] == [
        (1, "checking [redacted] first"), (2, "your key is [redacted], keep it safe")]
    fake_server.script(*echo_script())
    plain = glassloop_here("ask", "again", "--base-url", fake_server.base_url, env=keyed)
    assert plain.returncode == 0 and "your key is [redacted]" in plain.stdout
    assert_no_key("ask output", plain.stdout + plain.stderr)
    record("secrets", path="ask", deltas_per_key=len(KEY) // 3 + 1, files_checked=1, key_found=0)


def test_repl_journal_trace_and_saves_hold_no_streamed_key(fake_server, keyed, tmp_path):
    fake_server.script(*echo_script())
    saved = tmp_path / "saved"
    saved.mkdir()
    lines = ["echo my key", f"/save {saved / 'chat.md'}", f"/save {saved / 'chat.json'}",
             f"/trace all --json --save {saved / 'trace.jsonl'}"]
    result = glassloop_here("--base-url", fake_server.base_url, env=keyed, stdin="\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr
    files = [p for folder in ("XDG_DATA_HOME", "XDG_STATE_HOME") for p in Path(keyed[folder]).rglob("*.jsonl")]
    files += sorted(saved.iterdir())
    kinds = set()
    for path in files:
        raw = path.read_text(encoding="utf-8")
        records = jsonl(path) if path.suffix == ".jsonl" else [json.loads(raw)] if path.suffix == ".json" else []
        assert_no_key(str(path), raw, records)
        kinds.add(path.parent.name if path.suffix == ".jsonl" else path.suffix)
    assert {"traces", "sessions", "saved", ".md", ".json"} <= kinds
    record("secrets", path="repl", files_checked=len(files), key_found=0)


def test_raw_wire_file_holds_no_secret(fake_server, keyed, tmp_path):
    """The ``.wire`` file keeps each model call's request and response body: a configured key,
    an ``sk-`` key, a URL's password and a key streamed in two pieces are blanked there too."""
    shaped, password = "sk-wireShapedKey0123456789", "dbPassw0rdInUrl"
    url = f"postgres://admin:{password}@db.example.test/app"
    answer = f"your key is {KEY}, the other is {shaped}, the database {url}"
    halfway = answer.index(KEY) + len(KEY) // 2  # the first chunk ends in the middle of the key
    fake_server.script(tool_calls(call("search_notes", {"query": f"{KEY} {shaped} {url}"})),
                       text(answer, chunk_size=halfway))
    trace_file = tmp_path / "t.jsonl"
    result = glassloop_here("ask", f"remember {KEY}, {shaped} and {url}", "--base-url", fake_server.base_url,
                            "--trace-file", str(trace_file), env=keyed)
    assert result.returncode == 0 and "your key is [redacted]" in result.stdout, result.stdout + result.stderr
    assert all(KEY in json.dumps(r.body) for r in fake_server.chat_requests())  # the bodies held the secrets
    wire = trace_file.with_suffix(".wire")
    raw, records = wire.read_bytes(), jsonl(wire)
    assert [(r["step"], r["kind"]) for r in records] == [(1, "request"), (1, "response"), (2, "request"),
                                                          (2, "response")]
    for secret in (KEY, shaped, password):
        assert secret.encode() not in raw, f"the .wire file holds {secret}"
        assert not [joined for joined in stitchable(records) if secret in joined]
    assert records[-1]["body"]["content"] == ("your key is [redacted], the other is [redacted], "
                                              "the database postgres://[redacted]@db.example.test/app")
    record("secrets", path="raw wire", records=len(records), secrets=3, found=0)


def test_typed_key_stays_out_of_the_history_file(repl_factory, fake_server, keyed):
    fake_server.script(text("noted"))
    repl = repl_factory()
    repl.say(f"my key is {KEY} and the other one is {TYPED_SHAPED}")
    repl.expect("noted")
    repl.ready()
    repl.close()
    history = Path(keyed["XDG_DATA_HOME"]) / "glassloop" / "input_history"
    stored = history.read_text(encoding="utf-8")
    assert "my key is" in stored  # the entry was written, with the secrets blanked
    assert KEY not in stored and TYPED_SHAPED not in stored
    record("secrets", path="input history", typed_secrets=2, stored=0)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_022():
    """The common umask, under which a file is made 0644 unless its maker says otherwise."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_journal_trace_raw_calls_and_input_history_are_the_users_alone(repl_factory, fake_server, home,
                                                                      umask_022, tmp_path):
    fake_server.script(text("private answer"), text("private too"))
    repl = repl_factory()
    repl.say("what did the model read?")
    repl.expect("private answer")
    repl.ready()
    repl.close()
    sessions = Path(home["XDG_DATA_HOME"]) / "glassloop" / "sessions"
    traces = Path(home["XDG_STATE_HOME"]) / "glassloop" / "traces"
    (journal,), (trace,), (wire,) = sessions.glob("*.jsonl"), traces.glob("*.jsonl"), traces.glob("*.wire")
    files = [journal, trace, wire, Path(home["XDG_DATA_HOME"]) / "glassloop" / "input_history"]
    assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}  # as a shell keeps its history
    assert (mode(sessions), mode(traces)) == (0o700, 0o700)
    asked = tmp_path / "new folder" / "t.jsonl"
    result = glassloop_here("ask", "hello", "--trace-file", str(asked), "--base-url", fake_server.base_url,
                            env=home)
    assert result.returncode == 0, result.stderr
    assert (mode(asked), mode(asked.parent)) == (0o600, 0o700)


def test_private_files_and_folders_whatever_the_umask(tmp_path):
    from repl.tracing.trace import JsonlWriter, WireLog

    old = os.umask(0o777)  # nothing allowed: each mode comes from the maker alone
    try:
        writer = JsonlWriter(tmp_path / "a" / "b" / "t.jsonl")
        writer.write({"n": 1})
        writer.close()
        wire = WireLog(tmp_path / "a" / "b" / "t.wire", None, 1000)
        for n in range(20):  # over the cap: the file is rewritten, its mode kept
            wire.write({"n": n, "body": "x" * 40})
        wire.close()
    finally:
        os.umask(old)
    made = [tmp_path / "a", tmp_path / "a" / "b", writer.path, wire.path]
    assert [mode(p) for p in made] == [0o700, 0o700, 0o600, 0o600]


def assert_url_masked(outputs: dict[str, str]) -> None:
    for name, out in outputs.items():
        assert "secret" not in out and "xyz" not in out, (name, out)
        assert "Traceback" not in out, name


def test_url_credentials_are_masked_in_config(keyed):
    shown = glassloop_here("config", "--base-url", BAD_URL, env=keyed)
    assert shown.returncode == 0, shown.stderr
    assert "http://***@127.0.0.1:1/v1?api-key=***" in shown.stdout
    assert_url_masked({"config": shown.stdout})


def test_url_credentials_are_masked_in_error_lines_and_trace(keyed, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[providers.openai]\nmax_retries = 0\ntimeout_s = 5\n", encoding="utf-8")
    trace_file = tmp_path / "t.jsonl"
    failed = glassloop_here("ask", "hi", "--config", str(config), "--base-url", BAD_URL,
                            "--trace-file", str(trace_file), env=keyed)
    assert failed.returncode == 1 and "cannot reach" in failed.stderr, failed.stderr
    chat = glassloop_here("--config", str(config), "--base-url", BAD_URL, env=keyed, stdin="hi\n")
    errors = [line for line in chat.stdout.splitlines() if line.startswith("error")]
    assert errors and "127.0.0.1:1" in errors[0], chat.stdout
    outputs = {"ask": failed.stdout + failed.stderr, "trace": trace_file.read_text(encoding="utf-8"),
               "chat": chat.stdout + chat.stderr}
    assert_url_masked(outputs)
    record("secrets", path="url credentials", outputs_checked=len(outputs) + 1, shown=0)


def test_known_secrets_are_every_secret_the_config_holds(tmp_path, monkeypatch):
    from repl.config.load import load_settings
    from repl.config.redact import redactor_for  # what the trace, journal and MCP logs are given

    token, header, password = "ghp_mcpEnvToken0123456789", "headerToken0123456789", "urlPassword99"
    config = tmp_path / "c.toml"
    config.write_text(
        f'[providers.openai]\nbase_url = "https://me:{password}@api.example.test/v1?key=queryKey0123"\n'
        f'[mcp.servers.gh]\nurl = "https://mcp.example.test/?token=mcpUrlToken0123"\n'
        f'headers = {{ Authorization = "Bearer {header}", Accept = "application/json" }}\n'
        f'[mcp.servers.local]\ncommand = "server"\nenv = {{ GITHUB_TOKEN = "{token}", MODE = "verbose-mode" }}\n',
        encoding="utf-8")
    for name in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    settings = load_settings(config_file=config, cwd=tmp_path, env={"OPENAI_API_KEY": KEY})
    redact = redactor_for(settings)
    secrets = [KEY, token, header, password, "queryKey0123", "mcpUrlToken0123"]
    said = "; ".join(f"value {s} here" for s in secrets) + "; application/json verbose-mode"
    out = redact(said)
    assert [s for s in secrets if s in out] == []
    assert "application/json" in out and "verbose-mode" in out  # not secret-named: kept
