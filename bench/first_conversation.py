"""A new user's first conversation with the embedded model, judged: ``python -m bench first_conversation``.

Ten scripted turns on a fresh machine (no todos, no notes), English and Chinese mixed, in one
session with approvals given (the README's example flow, then the things a newcomer tries
next). Each turn is judged automatically:

- echo: the answer repeats one of the user's messages (the question itself, or an earlier one);
- language: the answer is in the language of its question;
- tool: the first step calls the expected tool (or none, for the goodbye);
- faithful: the call keeps the values given (high priority -> "high") and sets no optional
  argument the user did not give (a due date, a tag, a detail);
- grounded: a list answer names the items of the result, an empty list says it is empty, a
  weather answer quotes the result; after an empty or failed result the answer invents nothing
  (no temperature or weather a tool did not return, no todo that does not exist).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import RESULTS, row, target
from bench.local_eval import (
    echoed,
    flat,
    invented,
    judge_turn,
    require_offered,
    require_routed,
    session,
)
from bench.tool_use import in_language, load

_TEMPERATURE = re.compile(r"-?\d+(\.\d+)?\s*(°|度|degrees?|℃)", re.IGNORECASE)
_WEATHER_WORDS = re.compile(r"sunny|rain|cloud|clear|snow|storm|drizzle|overcast|晴|雨|云|阴|雪", re.IGNORECASE)
_EMPTY_WORDS = re.compile(r"\b(no|none|empty|nothing|zero|0)\b|没有|暂无|为空|空的|0\s*(项|个|条)", re.IGNORECASE)


@dataclass(frozen=True)
class Turn:
    message: str
    lang: str
    tool: str  # the first call expected ("" = none); "|" separates tools that are equally right
    values: dict[str, str] = field(default_factory=dict)  # argument -> text its value must contain
    absent: tuple[str, ...] = ()  # optional arguments the user did not give
    names: tuple[str, ...] = ()  # a list answer must name each (case-insensitive)
    empty: bool = False  # the tool returns nothing: the answer says so and names no item
    grounded_in: tuple[str, ...] = ()  # the answer holds at least one of these (from the result)
    no_weather: bool = False  # the tool cannot know: the answer gives no temperature or weather


SCRIPT = [
    Turn("今天还有哪些没完成？把优先级最高的一项展开说明。", "zh", "list_todos", empty=True),
    Turn("add a todo: buy oat milk, high priority", "en", "add_todo",
         values={"title": "oat milk", "priority": "high"}, absent=("due", "tag", "detail")),
    Turn("Also remind me to call the bank.", "en", "add_todo", values={"title": "bank"},
         absent=("due", "tag", "detail", "priority")),
    Turn("Which todos are not done yet?", "en", "list_todos", names=("oat milk", "bank")),
    Turn("北京今天天气怎么样？", "zh", "get_weather", values={"city": ""},
         grounded_in=("18", "24", "11", "晴", "clear")),
    Turn("And in Paris?", "en", "get_weather", no_weather=True),
    Turn("记一下：周五下午三点开会。", "zh", "add_note", values={"text": "开会"}, absent=("tags",)),
    Turn("我都记了哪些笔记？", "zh", "list_notes|search_notes", names=("开会",)),
    Turn("What's 15% of 86?", "en", "calculator", grounded_in=("12.9",)),
    Turn("谢谢，再见！", "zh", ""),
]


def judge(turn: Turn, did: dict[str, Any], schemas: dict[str, dict[str, Any]], said: list[str]) -> dict[str, Any]:
    answer = did["answer"]
    first = next((c for c in did["calls"] if c["step"] == 1), None)
    expected = [name for name in turn.tool.split("|") if name]
    tool_ok = (first is None) if not expected else (first is not None and first["name"] in expected)
    args = first["arguments"] if first and isinstance(first["arguments"], dict) else {}
    faithful = None
    if expected and tool_ok and first is not None:
        kept = all(flat(want) in flat(str(args.get(name, ""))) and name in args for name, want in turn.values.items())
        made_up = [name for name in turn.absent if args.get(name) not in (None, "", [])]
        made_up += [n for n in invented(args, schemas.get(first["name"], {}), turn.message, turn.values)
                    if n not in made_up and n not in turn.absent]
        faithful = {"ok": first["valid"] and kept and not made_up, "kept": kept, "invented": made_up}
    # an answer is grounded in a result only when the tool ran and answered
    answered = any(r["ok"] and r["name"] in expected for r in did["results"])
    checks: dict[str, bool] = {}
    if turn.names:
        checks["names_items"] = answered and all(flat(name) in flat(answer) for name in turn.names)
    if turn.empty:
        checks["says_empty"] = answered and bool(_EMPTY_WORDS.search(answer))
    if turn.grounded_in:
        checks["grounded"] = answered and any(word.casefold() in answer.casefold() for word in turn.grounded_in)
    invented_answer = False
    if turn.no_weather or ("get_weather" in expected and not answered):  # weather no tool gave
        invented_answer = bool(_TEMPERATURE.search(answer) or _WEATHER_WORDS.search(answer))
    if turn.empty:  # no item exists: a title-like claim of one is invented
        invented_answer = invented_answer or bool(re.search(r"todo-\d+|priority|优先级[:：]", answer, re.I)
                                                  and not _EMPTY_WORDS.search(answer))
    return {"message": turn.message, "lang": turn.lang, "expected": turn.tool,
            "called": [c["name"] for c in did["calls"]], "first": first, "answer": answer,
            "results": did["results"], "seconds": did["seconds"], "asked_again": did.get("asked_again", 0),
            "echo": echoed(answer, said), "in_language": in_language(answer, turn.lang),
            "tool_ok": tool_ok, "faithful": faithful, "checks": checks, "invented_answer": invented_answer}


def converse(profile: str = "local") -> dict[str, Any]:
    before = load()
    turns = []
    with session(profile, dry_run=False, fixture=False) as (core, surface):
        said: list[str] = []
        for number, turn in enumerate(SCRIPT, 1):
            surface.events.clear()
            said.append(turn.message)
            require_offered([name for name in turn.tool.split("|") if name], core.registry.names(), turn.message)
            core.run_turn(turn.message)
            require_routed(core, turn.message)
            schemas = {s["name"]: s.get("parameters") or {} for s in core.registry.schemas()}
            judged = judge(turn, judge_turn(surface.events, schemas), schemas, said)
            turns.append(judged)
            problems = [name for name, bad in (("ECHO", judged["echo"]), ("LANG", not judged["in_language"]),
                                               ("TOOL", not judged["tool_ok"]),
                                               ("UNFAITHFUL", judged["faithful"] and not judged["faithful"]["ok"]),
                                               ("INVENTED", judged["invented_answer"])) if bad]
            problems += [f"NOT-{name}" for name, ok in judged["checks"].items() if not ok]
            problems += ["AGAIN"] * bool(judged["asked_again"])
            print(f"  {number:2} {turn.lang} {' '.join(problems) or 'ok':<20} {judged['seconds'] or 0:5.1f} s "
                  f"{' '.join(judged['called']) or '-'} "
                  f"{json.dumps(judged['first']['arguments'] if judged['first'] else '', ensure_ascii=False)[:70]}"
                  f" | {judged['answer'][:70]!r}", file=sys.stderr, flush=True)
    return {"profile": profile, "load_before": before, "load_after": load(),
            "time": time.strftime("%Y-%m-%d %H:%M:%S"), **summary(turns), "turns": turns}


def summary(turns: list[dict[str, Any]]) -> dict[str, Any]:
    calls = [t["faithful"]["ok"] for t in turns if t["faithful"] is not None]
    checks = [ok for t in turns for ok in t["checks"].values()]
    return {"turns_n": len(turns), "echoes": sum(t["echo"] for t in turns),
            "asked_again": sum(t["asked_again"] for t in turns),
            "invented_answers": sum(t["invented_answer"] for t in turns),
            "in_language": sum(t["in_language"] for t in turns),
            "right_tool": sum(t["tool_ok"] for t in turns),
            "faithful_calls": f"{sum(calls)}/{len(calls)}",
            "grounded_checks": f"{sum(checks)}/{len(checks)}"}


def run(quick: bool = False) -> dict[str, Any]:
    """``python -m bench first_conversation``: one conversation (minutes of CPU; ``quick`` skips it)."""
    if quick:
        return {"name": "first_conversation", "rows": [], "targets": {},
                "skipped": "not run with --quick (minutes of CPU)"}
    figures = converse()
    rows = [row(key, float(figures[key]), "") for key in ("echoes", "invented_answers", "in_language", "right_tool")]
    return {"name": "first_conversation", "rows": rows, "figures": figures, "targets": {
        "echoes": target(figures["echoes"], 0, "no echoed answer"),
        "invented": target(figures["invented_answers"], 0, "nothing invented after an empty or failed result")}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="local", choices=("local", "local-large"))
    parser.add_argument("--out", type=Path, default=RESULTS / "first_conversation.json")
    args = parser.parse_args(argv)
    figures = converse(args.profile)
    print(json.dumps({k: v for k, v in figures.items() if k != "turns"}, ensure_ascii=False))
    args.out.parent.mkdir(parents=True, exist_ok=True)  # bench/results/ is not in a clone
    args.out.write_text(json.dumps(figures, indent=1, ensure_ascii=False), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
