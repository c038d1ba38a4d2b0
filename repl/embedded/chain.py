"""The routers a question to the embedded model goes through, in their order (``chain``); the
session core, the tests and the benchmarks build it here alone."""

from __future__ import annotations

from repl.embedded.knowledge import Knowing, Knowledge
from repl.embedded.router import MeaningRouter, Overruled, Ranked, SmallTalk
from repl.embedded.shapes import Shaped
from repl.embedded.words import CuedFirst, WordsRouter
from repl.loop.routing import FirstOf
from tools.registry import Registry


def chain(registry: Registry, meaning: MeaningRouter | None = None) -> FirstOf:
    """The routers in their order, the first that decides deciding: a value shaped like a
    parameter's example ("todo-002": the tools that take a todo's id, those of them the words
    point to if any), unless a tool is named or the message follows up the turn before; then one
    built-in tool by its cues, a tool named or a follow-up; else small talk; then the tools' words
    (several ranked by their meaning); where none is found, their meaning. The words' choice gives
    way to a tool no cue names that meaning puts well above it (``Overruled``). A question of
    knowledge is answered in text whatever the words or meaning chose (``Knowing``; a tool named
    or a follow-up is kept). ``meaning``: the router by meaning (default: over each tool's examples as the
    registry has them at each question, as MCP servers and user tools arrive)."""

    def examples_of(name: str) -> tuple[str, ...]:
        tool = registry.get(name)
        return tool.examples if tool is not None else ()

    meaning = meaning or MeaningRouter(examples_of)
    words = WordsRouter.of(registry)
    knowledge = Knowledge(meaning)
    first, ranked = (Overruled(router, meaning, words.cues) for router in (CuedFirst(words), Ranked(words, meaning)))
    return FirstOf(Shaped(meaning, words), Knowing(first, knowledge), SmallTalk(meaning),
                   Knowing(ranked, knowledge), Knowing(meaning, knowledge))
