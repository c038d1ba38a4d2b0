"""Bilingual tool-use evaluation of the embedded model: ``python -m bench tool_use``.

The questions are a case file of ``glassloop eval`` (``bench/tool_use.toml``): 24 requests
that need a tool (12 English, 12 Chinese: the same intents in both languages) and 16
controls (8 + 8: chit-chat, and a question about todos in general that needs no data). They
run through eval's own code (``repl/trials/evaluate.py``), the one mechanism a user runs on
their tools: the session core with the embedded provider as a session builds it (the
llama.cpp server, text tool calls, the grammar), the built-in tools over a fixture (todos,
notes, files) in isolated XDG dirs, side effects dry-run, a fresh history per question, at
most 3 steps. One server per temperature (0.1 and 0.7) serves every question, so its cache
holds the fixed prompt prefix.

Figures per temperature: schema-valid calls (every call of every step, as written: JSON
without repair, valid for the tool's schema), the right tool first with valid arguments that
pass the case's checks (English, Chinese), controls answered without a call, final answers
in the question's language, and seconds per question. Every run records the machine's load
(``uptime``) before and after.

The full run also measures the grammar's cost per generated token (``--grammar-cost``
alone): greedy first steps with and without it, prompt prefix cached, for both sampling
orders of the embedded server (target: at most +30%).

``--quick`` runs four questions against the scripted server (no model): it checks
the harness, not the model. ``python -m bench.tool_use --help`` has the options
used to compare variants (no grammar, one temperature, a subset, the held-out questions of
``bench/tool_use_held_out.toml``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import ServerProcess, isolated_env, patched_environ, row, scratch, target

if TYPE_CHECKING:
    from repl.providers.base import SystemPrompt

CASE_FILE = Path(__file__).with_name("tool_use.toml")
HELD_OUT_FILE = Path(__file__).with_name("tool_use_held_out.toml")
TEMPERATURES = (0.1, 0.7)
MAX_STEPS = 3
FIXTURE_TODOS = [
    {"id": "todo-001", "title": "Buy groceries", "detail": "Milk, eggs, rice.", "status": "done",
     "priority": "low"},
    {"id": "todo-002", "title": "Write the weekly report", "status": "todo", "priority": "high",
     "detail": "Summarise the release, the two incidents and next week's plan.", "due": "2025-05-02"},
    {"id": "todo-003", "title": "Reply to Alice's email", "detail": "She asked about the budget.",
     "status": "todo", "priority": "medium"},
    {"id": "todo-004", "title": "Book a dentist appointment", "detail": "", "status": "todo",
     "priority": "low"},
]
FIXTURE_NOTES = [{"id": "note-001", "text": "Invoice 2025-04 paid on 3 May", "tags": ["invoice"]},
                 {"id": "note-002", "text": "发票：四月的发票已寄出", "tags": ["发票"]}]
FIXTURE_FILES = {"plan.md": "# Plan\n\n1. Ship the release\n2. Write the report\n",
                 "notes/ideas.txt": "a terminal agent\n"}
# A right call for each request: the scripted replies of --quick, and what the grammar must accept.
REFERENCES = {
    "Which todos are not done yet?": {"name": "list_todos", "arguments": {"status": "todo"}},
    "今天还有哪些没完成？": {"name": "list_todos", "arguments": {"status": "todo"}},
    "Show me the details of todo-002.": {"name": "get_todo", "arguments": {"todo_id": "todo-002"}},
    "给我看看 todo-002 的详细内容。": {"name": "get_todo", "arguments": {"todo_id": "todo-002"}},
    "Add a todo: buy milk.": {"name": "add_todo", "arguments": {"title": "Buy milk"}},
    "添加一个待办：买牛奶。": {"name": "add_todo", "arguments": {"title": "买牛奶"}},
    "Remind me to call the plumber on Friday.": {"name": "add_todo", "arguments": {"title": "Call the plumber"}},
    "提醒我明天下午三点开会。": {"name": "add_todo", "arguments": {"title": "开会"}},
    "Mark todo 3 as done.": {"name": "complete_todo", "arguments": {"todo_id": 3}},
    "把第3项待办标记为已完成。": {"name": "complete_todo", "arguments": {"todo_id": 3}},
    "Delete todo 4.": {"name": "delete_todo", "arguments": {"todo_id": 4}},
    "删除第4项待办。": {"name": "delete_todo", "arguments": {"todo_id": 4}},
    "What is 17.5% of 2480?": {"name": "calculator", "arguments": {"expression": "2480 * 17.5 / 100"}},
    "2480的17.5%是多少？": {"name": "calculator", "arguments": {"expression": "2480 * 0.175"}},
    "How much is 1234 times 5678?": {"name": "calculator", "arguments": {"expression": "1234 * 5678"}},
    "1234乘以5678等于多少？": {"name": "calculator", "arguments": {"expression": "1234 * 5678"}},
    "What's the weather in Paris today?": {"name": "get_weather", "arguments": {"city": "Paris"}},
    "北京今天天气怎么样？": {"name": "get_weather", "arguments": {"city": "北京"}},
    "Save a note: the wifi password is on the fridge.": {"name": "add_note",
                                                         "arguments": {"text": "The wifi password is on the fridge"}},
    "记一条笔记：wifi密码贴在冰箱上。": {"name": "add_note", "arguments": {"text": "wifi密码贴在冰箱上"}},
    "Search my notes for invoice.": {"name": "search_notes", "arguments": {"query": "invoice"}},
    "在我的笔记里搜索“发票”。": {"name": "search_notes", "arguments": {"query": "发票"}},
    "What files are in my workspace?": {"name": "list_files", "arguments": {}},
    "我的工作区里有哪些文件？": {"name": "list_files", "arguments": {}},
}
QUICK_CASES = ("todos-open", "hello")
_HAN = re.compile(r"[\u3400-\u9fff]")
_LATIN = re.compile(r"[A-Za-z]")


def in_language(text: str, lang: str) -> bool:
    """Chinese: Han characters are at least a third of the letters; English: none. An
    answer without letters (``434.0``) is in every language."""
    han, latin = len(_HAN.findall(text)), len(_LATIN.findall(text))
    if han == latin == 0:
        return bool(text.strip())
    return han > 0 and han * 2 >= latin if lang == "zh" else han == 0


def load() -> str:
    """``uptime``'s load averages (1, 5, 15 minutes)."""
    try:
        out = subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    found = re.search(r"load averages?:\s*(.+)", out)
    return found.group(1).strip() if found else " ".join(f"{x:.2f}" for x in os.getloadavg())


# ------------------------------------------------------------------ the questions


def cases(held_out: bool = False) -> list[Any]:
    """The evaluation's cases (``glassloop eval``'s ``Case``), or the held-out ones."""
    from repl.trials.evaluate import load_cases

    return load_cases(HELD_OUT_FILE if held_out else CASE_FILE)


def fixture(folder: Path) -> Any:
    """glassloop's tools over a fresh fixture in ``folder`` (todos, notes, files)."""
    from tools import build_tools
    from tools.registry import Registry

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "todos.json").write_text(json.dumps({"version": 1, "todos": FIXTURE_TODOS}), "utf-8")
    (folder / "notes.json").write_text(json.dumps({"version": 1, "notes": FIXTURE_NOTES},
                                                  ensure_ascii=False), "utf-8")
    files = folder / "files"
    for name, text in FIXTURE_FILES.items():
        (files / name).parent.mkdir(parents=True, exist_ok=True)
        (files / name).write_text(text, "utf-8")
    return Registry(build_tools(todos_path=folder / "todos.json", notes_path=folder / "notes.json",
                                files_root=files, weather="sample"))


def schema_valid(name: str, arguments: str, schemas: dict[str, dict[str, Any]]) -> bool:
    """The call as written: a known tool, arguments strict JSON (no repair) valid for its schema."""
    from tools.validation import validator_for

    if name not in schemas:
        return False
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        return False
    return isinstance(args, dict) and validator_for(schemas[name]).is_valid(args)


def settings_for(work: Path, profile: str, provider_lines: str = "") -> Any:
    """Settings of ``profile`` over the fixture in ``work`` (at most 3 steps a question)."""
    from repl.config.load import load_settings

    fixture(work / "fixture")
    config = work / "bench.toml"
    config.write_text(f"[guards]\nmax_steps = {MAX_STEPS}\n[tools]\nweather = \"sample\"\n"
                      f"todos_file = {json.dumps(str(work / 'fixture' / 'todos.json'))}\n"
                      f"notes_file = {json.dumps(str(work / 'fixture' / 'notes.json'))}\n"
                      f"files_root = {json.dumps(str(work / 'fixture' / 'files'))}\n"
                      f"[providers.{profile}]\n{provider_lines}", "utf-8")
    return load_settings({"provider": profile}, cwd=work, env=os.environ, config_file=config)


def run_cases(settings: Any, chosen: list[Any], label: str, grammar: bool) -> list[dict[str, Any]]:
    """``chosen`` through ``glassloop eval``'s run of a model; each case as eval reports it, with
    whether its answer is in the question's language."""
    from repl.trials.evaluate import run_model

    def done(outcome: Any) -> None:
        calls = " ".join(f"{c['name']}{'' if c['valid'] else '(INVALID)'}" for c in outcome.calls) or "-"
        mark = ("ok" if outcome.ok else "WRONG") if outcome.case.tools else ("ok" if outcome.ok else "CALLED")
        print(f"  [{label}] {outcome.case.lang} {outcome.case.id:<13} {mark:<6} {outcome.seconds:6.1f} s  {calls}  "
              f"| {outcome.answer[:60]!r}", file=sys.stderr, flush=True)

    def with_grammar(provider: Any) -> None:
        chat = getattr(provider, "_provider", provider)  # under the server-owning wrapper
        chat.dialect = replace(chat.dialect, grammar=grammar)

    run = run_model(settings, chosen, say=lambda line: print(line, file=sys.stderr, flush=True), done=done,
                    prepare=with_grammar)
    if run.error:
        raise RuntimeError(run.error)
    return [{**o.as_json(), "answer_in_language": in_language(o.answer, o.case.lang)} for o in run.outcomes]


def score(results: list[dict[str, Any]]) -> dict[str, Any]:
    def pct(part: list[bool]) -> float:
        return 100.0 * sum(part) / len(part) if part else float("nan")

    tool_cases = [r for r in results if r["expected"]]
    calls = [c["valid"] for r in results for c in r["calls"]]
    return {
        "calls": len(calls),
        "schema_valid_pct": pct(calls) if calls else 100.0,
        "right_pct": pct([r["ok"] for r in tool_cases]),
        "right_en_pct": pct([r["ok"] for r in tool_cases if r["lang"] == "en"]),
        "right_zh_pct": pct([r["ok"] for r in tool_cases if r["lang"] == "zh"]),
        "controls_no_call_pct": pct([r["ok"] for r in results if not r["expected"]]),
        "answer_language_pct": pct([r["answer_in_language"] for r in results]),
        "answer_language_zh_pct": pct([r["answer_in_language"] for r in results if r["lang"] == "zh"]),
        "seconds_mean": sum(r["seconds"] for r in results) / max(len(results), 1),
        "first_step_s_mean": (sum(r["first_step_s"] or 0 for r in results) / max(len(results), 1)),
    }


# ------------------------------------------------------------------ the runs


def local_provider(temperature: float, model: Path, work: Path, grammar: bool = True,
                   profile: str = "local", gate: bool = True, calls: str | None = None,
                   n_ctx: int | None = None) -> Any:
    from repl.config.load import load_settings
    from repl.session.runtime import make_provider

    config = work / "bench.toml"
    config.write_text(f"[providers.{profile}]\nmodel_path = {json.dumps(str(model))}\n"
                      f"temperature = {temperature}\nrouter = {str(gate).lower()}\n"
                      f"{call_temperature_line(calls)}" + (f"n_ctx = {n_ctx}\n" if n_ctx else ""), "utf-8")
    settings = load_settings({"provider": profile}, cwd=work, env=os.environ, config_file=config)
    provider = make_provider(settings.active, settings)
    # the embedded server's dialect has the grammar on; off only to measure without it
    chat = getattr(provider, "_provider", provider)  # under the server-owning wrapper
    chat.dialect = replace(chat.dialect, grammar=grammar)
    return provider


def call_temperature_line(calls: str | None) -> str:
    """The profile's ``call_temperature`` for ``--call-temperature T|off`` (None: the default;
    "off": 2, the highest temperature, so calls are sampled at the request's)."""
    if calls is None:
        return ""
    return f"call_temperature = {2.0 if calls == 'off' else float(calls)}\n"


def calls_sampling(calls: str | None) -> str:
    """The temperature cap the embedded server decodes a step's first token and its calls at
    (``[providers.local] call_temperature``), or "off" (everything at the request's temperature)."""
    from repl.embedded.server import CALL_TEMPERATURE

    return str(CALL_TEMPERATURE) if calls is None else calls


def evaluate(temperatures: tuple[float, ...], chosen: list[Any], grammar: bool = True,
             data_dir: Path | None = None, profile: str = "local", gate: bool = True,
             calls: str | None = None) -> dict[str, Any]:
    from repl.embedded.weights import BUNDLED, ensure_model

    model = ensure_model(data_dir or Path(tempfile.gettempdir()) / "glassloop-bench", spec=BUNDLED[profile])
    runs: dict[str, Any] = {}
    with scratch("tool-use") as work, patched_environ(isolated_env(work / "xdg")):
        for temperature in temperatures:
            label = f"t{temperature}"
            before = load()
            settings = settings_for(work, profile, f"model_path = {json.dumps(str(model))}\n"
                                    f"temperature = {temperature}\nrouter = {str(gate).lower()}\n"
                                    f"{call_temperature_line(calls)}")
            results = run_cases(settings, chosen, label, grammar)
            runs[label] = {"profile": profile, "temperature": temperature, "grammar": grammar,
                           "router": gate, "call_temperature": calls_sampling(calls), "load_before": before,
                           "load_after": load(), **score(results), "results": results}
    return runs


COST_CASES = ("todos-open", "percent", "weather", "hello")  # calls and answers, both languages


def grammar_cost(cases: list[Any], rounds: int = 2, data_dir: Path | None = None,
                 profile: str = "local") -> dict[str, Any]:
    """Seconds per generated token with and without the grammar on the first step, greedy
    (temperature 0: the same text either way, checked) with the prompt prefix cached, for the
    two orders of sampling: the grammar checked on the sampled token only (llama.cpp's own
    order, glassloop's default) and over the whole vocabulary first (llama-cpp-python's,
    ``LocalServer(grammar_first=True)``). One server per order; requests alternate with and without."""
    import httpx

    from repl.config.settings import ProviderSettings
    from repl.embedded.grammar import tool_grammar
    from repl.embedded.server import LocalServer
    from repl.embedded.weights import BUNDLED, ensure_model
    from repl.session.runtime import system_prompt_for

    model = ensure_model(data_dir or Path(tempfile.gettempdir()) / "glassloop-bench", spec=BUNDLED[profile])
    out: dict[str, Any] = {"load_before": load()}
    with scratch("grammar-cost") as work, patched_environ(isolated_env(work / "xdg")):
        registry = fixture(work / "fixture")
        tools, system = registry.schemas(), system_prompt_for(ProviderSettings(name="local"), registry)
        grammar = tool_grammar(tools)
        for order in ("last", "first"):
            server = LocalServer(model, log_path=work / f"server-{order}.log", state_dir=work / "state",
                                 grammar_first=order == "first")
            seconds = {"with": 0.0, "without": 0.0}
            tokens = {"with": 0, "without": 0}
            same = []
            try:
                url = server.start()
                with httpx.Client(timeout=600, trust_env=False) as client:
                    _first_step(client, url, system, cases[0].message, tools, None)  # evaluates the fixed prefix: not timed
                    for number in range(rounds):
                        for case in cases:
                            replies = {}
                            for kind in (("with", "without") if number % 2 else ("without", "with")):
                                text, count, spent = _first_step(client, url, system, case.message, tools,
                                                                 grammar if kind == "with" else None)
                                replies[kind], seconds[kind], tokens[kind] = (
                                    text, seconds[kind] + spent, tokens[kind] + count)
                            same.append(replies["with"] == replies["without"])
            finally:
                server.stop()
            per_token = {kind: seconds[kind] / max(tokens[kind], 1) for kind in seconds}
            out[order] = {"s_per_token_with": per_token["with"], "s_per_token_without": per_token["without"],
                          "cost_pct": 100.0 * (per_token["with"] / per_token["without"] - 1),
                          "identical": f"{sum(same)} of {len(same)}", "tokens": tokens["with"]}
    out["load_after"] = load()
    return out


def _first_step(client: Any, url: str, system: SystemPrompt, text: str, tools: list[dict[str, Any]],
                grammar: str | None) -> tuple[str, int, float]:
    """One greedy first step (not streamed: the server counts the tokens): reply, tokens, seconds."""
    from repl.embedded import textcalls

    messages = [*system.messages(), {"role": "user", "content": text}]
    body = {"model": "local", "messages": textcalls.to_text_messages(messages, tools), "temperature": 0.0,
            "max_tokens": 80, **({"grammar": grammar} if grammar else {})}
    started = time.perf_counter()
    reply = client.post(f"{url}/chat/completions", json=body).json()
    return (reply["choices"][0]["message"]["content"], reply["usage"]["completion_tokens"],
            time.perf_counter() - started)


def _cost_rows(cost: dict[str, Any]) -> list[dict[str, Any]]:
    note = f"load {cost['load_before']} -> {cost['load_after']}"
    rows = []
    for order, what in (("last", "grammar on the sampled token (default)"),
                        ("first", "grammar over the whole vocabulary first")):
        part = cost[order]
        rows += [row(f"{what}: cost per generated token", part["cost_pct"], "%",
                     f"{part['s_per_token_with']:.3f} vs {part['s_per_token_without']:.3f} s/token, "
                     f"identical {part['identical']}; {note}")]
    return rows


def _targets(runs: dict[str, Any]) -> dict[str, Any]:
    targets = {}
    for label, run in runs.items():
        t = run["temperature"]
        targets[f"valid_{label}"] = target(run["schema_valid_pct"], 100, f"schema-valid calls = 100% (t={t})",
                                           at_least=True)
        targets[f"right_{label}"] = target(run["right_pct"], 85, f"right tool, valid arguments >= 85% (t={t})",
                                           at_least=True)
        gap = abs(run["right_en_pct"] - run["right_zh_pct"])
        targets[f"gap_{label}"] = target(gap, 10, f"Chinese within 10 points of English (t={t})")
        targets[f"controls_{label}"] = target(run["controls_no_call_pct"], 90,
                                              f"controls answered without a call >= 90% (t={t})", at_least=True)
    return targets


def _rows(runs: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for label, run in runs.items():
        note = f"load {run['load_before']} -> {run['load_after']}"
        how = f"calls at t <= {run.get('call_temperature', 'off')}, router {'on' if run.get('router', run.get('small_talk_gate')) else 'off'}"
        rows += [row(f"{label}: schema-valid calls ({run['calls']})", run["schema_valid_pct"], "%"),
                 row(f"{label}: right tool + valid arguments", run["right_pct"], "%", f"{how}; {note}"),
                 row(f"{label}: right, English", run["right_en_pct"], "%"),
                 row(f"{label}: right, Chinese", run["right_zh_pct"], "%"),
                 row(f"{label}: controls answered without a call", run["controls_no_call_pct"], "%"),
                 row(f"{label}: answers in the question's language", run["answer_language_pct"], "%"),
                 row(f"{label}: seconds per question (mean)", run["seconds_mean"], "s"),
                 row(f"{label}: first step (mean)", run["first_step_s_mean"], "s")]
    return rows


def quick_run() -> dict[str, Any]:
    """The harness over the scripted server: a reference call and an answer per question."""
    from repl.embedded.grammar import tool_grammar

    chosen = [c for c in cases() if c.id in QUICK_CASES]
    script: list[dict[str, Any]] = []
    for case in chosen:
        if case.tools:
            script.append({"text": f"```json\n{json.dumps(REFERENCES[case.message], ensure_ascii=False)}\n```"})
        script.append({"text": "好的，已经完成。" if case.lang == "zh" else "Done, here you are."})
    grammar = importlib.util.find_spec("llama_cpp") is not None  # the converter comes with the local extra
    with scratch("tool-use-quick") as work, ServerProcess(script, work) as server, \
            patched_environ(isolated_env(work / "xdg")):
        grammar_s = time.perf_counter()
        if grammar:
            tool_grammar(fixture(work / "g").schemas())
        grammar_s = time.perf_counter() - grammar_s
        settings = settings_for(work, "scripted", f"base_url = {json.dumps(server.base_url)}\nmodel = \"scripted\"\n"
                                "tool_call_format = \"text\"\nmax_retries = 0\n")
        before = load()
        results = run_cases(settings, chosen, "quick", grammar)
        runs = {"t0.1": {"temperature": 0.1, "grammar": grammar, "load_before": before,
                         **score(results), "load_after": load(), "results": results}}
    return {"name": "tool_use", "rows": [*_rows(runs), row("grammar built (14 tools, first time)", grammar_s)],
            "targets": _targets(runs), "runs": runs}


def run(quick: bool = False) -> dict[str, Any]:
    if quick:
        return quick_run()
    from repl.embedded.server import missing_extra_message

    problem = missing_extra_message()
    if problem:
        return {"name": "tool_use", "rows": [], "targets": {}, "skipped": problem}
    every = cases()
    runs = evaluate(TEMPERATURES, every)
    cost = grammar_cost([c for c in every if c.id in COST_CASES])
    targets = {**_targets(runs), "grammar_cost": target(cost["last"]["cost_pct"], 30,
                                                        "grammar cost <= +30% per generated token")}
    return {"name": "tool_use", "rows": _rows(runs) + _cost_rows(cost), "targets": targets, "runs": runs,
            "grammar_cost": cost}


def main() -> None:
    from repl.config.settings import EMBEDDED_PROFILES

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--temperatures", default="0.1,0.7")
    parser.add_argument("--no-grammar", action="store_true", help="send no grammar (the baseline)")
    parser.add_argument("--no-router", action="store_true",
                        help="let the model choose its tools alone (router = false)")
    parser.add_argument("--call-temperature", metavar="T|off",
                        help="the cap on the temperature of a step's first token and of its calls "
                             "(default: the server's, 0.1; off: everything at --temperatures)")
    parser.add_argument("--held-out", action="store_true",
                        help=f"the held-out questions ({HELD_OUT_FILE.name}) instead of the evaluation's")
    parser.add_argument("--only", default="", help="comma-separated case ids (default: all)")
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    parser.add_argument("--profile", default="local", choices=EMBEDDED_PROFILES,
                        help="the embedded model: local (0.5B) or local-large (1.5B, its extra installed)")
    parser.add_argument("--data-dir", type=Path, help="where the model file is assembled (default: a temp folder)")
    parser.add_argument("--grammar-cost", action="store_true",
                        help="only measure the grammar's cost per generated token (both sampling orders)")
    args = parser.parse_args()
    chosen = [c for c in cases(args.held_out) if not args.only or c.id in args.only.split(",")]
    if args.grammar_cost:
        cost = grammar_cost([c for c in chosen if c.id in COST_CASES] if not args.only else chosen,
                            data_dir=args.data_dir, profile=args.profile)
        print(json.dumps(cost, indent=1, ensure_ascii=False))
        return
    temps = tuple(float(t) for t in args.temperatures.split(","))
    runs = evaluate(temps, chosen, grammar=not args.no_grammar, data_dir=args.data_dir, profile=args.profile,
                    gate=not args.no_router, calls=args.call_temperature)
    summary = {label: {k: v for k, v in run.items() if k != "results"} for label, run in runs.items()}
    print(json.dumps(summary, indent=1, ensure_ascii=False))
    if args.out:
        args.out.write_text(json.dumps(runs, indent=1, ensure_ascii=False), "utf-8")


if __name__ == "__main__":
    main()
