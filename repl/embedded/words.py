"""Choosing a question's tools by their words: the built-in tools' cues (``cues.py``, by tool name;
any other tool's: its description's first sentence, widened by ``gloss.py``) and short
follow-ups. Small talk is decided before it (``router.SmallTalk``); the router by meaning
(``router.py``) decides what these find nothing in.

Measured, the words still choose better than meaning alone on the sets they were grown over
(docs/LOCAL_MODEL.md, "How a tool is chosen"): they decide first, and where no word of any tool
is found the question goes to the router by meaning instead of being answered without tools.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from repl.embedded.cues import DUE_CUE, NUMBER_CUE, cues_of
from repl.embedded.gloss import ACTIONS, GLOSS, NOT_MEANT, widened
from repl.embedded.grammar import NUMBER
from repl.embedded.named import one_slip
from repl.loop.routing import RouteRequest
from repl.providers.base import ToolChoice
from tools.registry import Registry, ToolSchema

_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


class WordsRouter:
    """The tools a question's words point to (``loop.routing.Router``); None where none do,
    so the next router decides. ``cues``: each tool's cues by name, read at each question."""

    def __init__(self, cues: Callable[[], Mapping[str, Sequence[str]]]) -> None:
        self.cues = cues

    @classmethod
    def of(cls, registry: Registry) -> WordsRouter:
        """The router of ``registry``'s tools: its built-in tools' cues (``cues.cues_of``)."""
        return cls(lambda: cues_of(registry))

    def choose(self, request: RouteRequest) -> ToolChoice | None:
        if not request.tools:
            return None
        chosen, words = _cued(request.question, request.tools, self.cues())
        if chosen:
            names = tuple(t["name"] for t in chosen)
            return ToolChoice("required", names, by=_said(words) if words else "named")
        if called := followed(request):
            return ToolChoice("required", called, by="follow_up")
        return None


class CuedFirst:
    """The words router's decision where it needs nothing more (``loop.routing.Router``): a tool
    the message names, a follow-up, or one built-in tool whose cues were found, before small
    talk (no greeting holds a built-in tool's cue). Anything else (several tools, a user's or an
    MCP tool found by its description's words, nothing found) is left to the routers after it,
    small talk, the ranking and meaning."""

    def __init__(self, words: WordsRouter) -> None:
        self.words = words

    def choose(self, request: RouteRequest) -> ToolChoice | None:
        choice = self.words.choose(request)
        if choice is None:
            return None
        if choice.by in ("named", "follow_up"):
            return choice
        return choice if len(choice.allowed) == 1 and choice.allowed[0] in self.words.cues() else None


def named_tools(question: str, tools: Sequence[ToolSchema]) -> list[ToolSchema]:
    """The tools ``question`` names ("call add_todo with ...")."""
    said = question.casefold()
    return [tool for tool in tools if re.search(rf"(?<![\w-]){re.escape(tool['name'].casefold())}(?![\w-])", said)]


def _said(words: Sequence[str]) -> str:
    return "words " + ", ".join(f'"{word}"' for word in words)


# description words that say nothing about what a request is for
_GENERIC = frozenset("""about after also among another based before being between both called could each
 every from given have into more most only other over same some such than that their them then there these
 they this those through under using very what when where which while will with within would your
 specific something things thing current the and for all any are but can get has its not one out
 own put set use new two may list""".split())
_OPERATORS = frozenset("+*×÷")  # cues found only between numbers
_CUE_WORD = re.compile(r"[a-z0-9][a-z0-9'-]*")
_PHRASE = re.compile(r"[a-z0-9'-]+(?: [a-z0-9'-]+)+")


def routed(question: str, tools: Sequence[ToolSchema], cues: Mapping[str, Sequence[str]]) -> list[ToolSchema]:
    """The tools ``question`` points to: those it names ("call add_todo with ..."), else those
    with the most cues found in it (none found: none). A tool's cues are those ``cues`` gives by
    its name (a built-in tool's: ``cues.BUILT_IN_CUES``), else the words of three letters or
    more of its description's first sentence (an MCP tool's, a user's tool), each with the
    everyday words of its meaning in both languages (``gloss.widened``), and the everyday words
    of a generic one ("current": now) counted only beside one of those; and, counted as two,
    the action of its name said on the thing it names ("save a note": add_note). A one-word cue
    is found as a word in any of its forms (``_forms``); an operator ("+", "×") between numbers;
    a phrase as those words, which are then no other tool's cues; other signs (".md", "%") or
    Chinese anywhere; ``DUE_CUE`` where something must be done by a day (``_DUE``)."""
    return _cued(question, tools, cues)[0]


def _cued(question: str, tools: Sequence[ToolSchema],
          cues: Mapping[str, Sequence[str]]) -> tuple[list[ToolSchema], tuple[str, ...]]:
    """``routed``'s tools, and the cues found for them (none when the question names them)."""
    if named := named_tools(question, tools):
        return named, ()
    said = question.casefold()
    quoted = [m.group(0) for m in _QUOTED.finditer(said) if not _PATH_LIKE.search(m.group(0))]
    said = _QUOTED.sub(_unquoted, said)
    forms = _word_forms(said)
    typed = {word for word in _CUE_WORD.findall(said) if len(word) >= _TYPO_CHARS}
    numbered = bool(NUMBER.search(said))
    due = bool(_DUE.search(said) and _MUST.search(said) and not _ASKED.search(said))

    def found(cue: str, singular: bool) -> bool:
        cue = cue.casefold().strip()
        if cue == DUE_CUE:
            return due
        if not cue or cue == NUMBER_CUE:
            return False
        if cue in _OPERATORS:  # an operator between numbers: "2+3", "1.5 × 4" (not "C++")
            return bool(re.search(rf"\d\s*{re.escape(cue)}\s*[\d.(]", said))
        text, words = said, forms
        if cue in NOT_MEANT:  # not inside a word or phrase of another sense: "冷笑话", "the third time"
            text = _masked(said, NOT_MEANT[cue])
            words = _word_forms(text)
        if _HAN_PAIR.fullmatch(cue):  # 下雨 also as 下大雨, 下了雨; 带伞 as 带把伞
            return bool(re.search(f"{re.escape(cue[0])}{_INFIX}{re.escape(cue[1])}", text))
        if _PHRASE.fullmatch(cue):  # words: as words ("at work" is not in "that works")
            return _as_words(cue, text)
        if _HAN.search(cue) or not _CUE_WORD.fullmatch(cue):  # ".md", "%", Chinese
            return cue in text
        return (cue in words or (singular and cue.endswith("s") and bool(_plural_bases(cue) & words))
                or (len(cue) >= _TYPO_CHARS and any(one_slip(cue, word) for word in typed)))

    found_for = []
    for tool in tools:
        own, modifiers = cues.get(tool["name"]), []
        # a cue written for the tool is found as written, in the forms of the question's words
        # (cue "todo": "todos"); a plural one is no singular ("shorts" is not "a short joke",
        # "times" not "the third time"). Words taken from a description may be either.
        singular = own is None
        if own is not None and NUMBER_CUE in own and not numbered:
            own = ()  # a count of things in the world is no sum
        if own is None:
            # without its first word, the verb of what the tool does ("Tell how long a food
            # keeps", "Shows the working tree status"): a verb says no topic ("tell me a joke")
            words = _CUE_WORD.findall(first_sentence(str(tool.get("description") or "")).casefold())[1:]
            own = widened(w for w in words if len(w) >= 3 and w not in _GENERIC)
            # a generic word ("current") is no cue, and what people say for it ("now", 现在) is
            # no topic either: it only tips the balance between tools the question is about
            modifiers = widened(w for w in words if w in _GENERIC and w in GLOSS)
        found_for.append((tool, [cue for cue in dict.fromkeys(own) if found(cue, singular)], modifiers, singular))
    phrases = {cue.casefold() for _, topic, _, _ in found_for for cue in topic if _PHRASE.fullmatch(cue.casefold())}
    scored = []
    for tool, topic, modifiers, singular in found_for:
        # a cue inside another one found counts once: "which file" in "which files"; and a phrase
        # found is read whole, its words are no other tool's cues: complete_todo's "finished" in
        # list_todos' "haven't finished" (in Chinese, without spaces, 多少 is still in 多少钱)
        topic = [cue for cue in topic if not any(cue != other and cue in other for other in topic)
                 and not any(_within(cue.casefold(), phrase) for phrase in phrases if phrase != cue.casefold())]
        tipped = [cue for cue in dict.fromkeys(modifiers) if found(cue, singular)] if topic else []
        # quoted words are something to find: beside a topic they tip it to a search tool (a question
        # for the files here that hold a quoted word: search_files over the folder's "here")
        if quoted and topic and _name_words(tool["name"])[0] == "search":
            tipped.append(quoted[0])
        action = _action(tool["name"], lambda cue: found(cue, True))
        # an action said on the thing it is done to counts for two: "添加一个待办" is add_todo
        # (add, todo) more than list_todos (todo)
        scored.append((len(topic) + len(tipped) + 2 * bool(action), tool, topic + tipped + action))
    best = max((score for score, _, _ in scored), default=0)
    chosen = [(tool, words) for score, tool, words in scored if best and score == best]
    return [tool for tool, _ in chosen], tuple(dict.fromkeys(word for _, words in chosen for word in words))


# a sentence ends at its stop and a space or line break, at a Chinese stop, or at a blank line (a
# docstring's summary line often has no stop)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|[。！？]|\n\s*\n")


def first_sentence(text: str) -> str:
    return _SENTENCE_END.split(text.strip(), maxsplit=1)[0]


def _within(cue: str, phrase: str) -> bool:
    """Whether ``cue`` is words of ``phrase``: a word in one of its forms ("say" in "that says")."""
    if _CUE_WORD.fullmatch(cue):
        return any(cue in _forms(word) for word in phrase.split())
    return _as_words(cue, phrase)


def _name_words(name: str) -> list[str]:
    """A tool name's words without an MCP server's prefix: "files__search_files" is search, files."""
    return name.rsplit("__", 1)[-1].casefold().split("_")


def _as_words(words: str, text: str) -> bool:
    """``text`` holds ``words`` as words, not inside longer ones."""
    return bool(re.search(rf"(?<!\w){re.escape(words)}(?!\w)", text))


def _action(name: str, found: Callable[[str], bool]) -> list[str]:
    """The words of a question that say the action of a tool's name on its thing, as ``found``
    finds them: one for the verb (``gloss.ACTIONS``) and one for the thing the name ends with
    (the word in either number, or ``GLOSS``'s words for it: ``widened``), else none. add_todo: "add" or 添加,
    with "todo", "task" or 待办; an MCP server's prefix is no part of it ("files__search_files")."""
    words = _name_words(name)
    if len(words) < 2 or words[0] not in ACTIONS:
        return []
    verb = next((cue for cue in ACTIONS[words[0]] if found(cue)), None)
    noun = next((cue for cue in widened(words[-1:]) if found(cue)), None) if verb else None
    return [verb, noun] if verb and noun else []


# a title or quoted words are named, not said: "孙燕姿的《雨天》" asks no weather, "《时间》这本书"
# no clock; a quoted file name ('plan.md', "receipts/发票.txt") stays. At most 200 characters: a
# paste of unclosed quotes is then searched in linear time (unbounded, 50,000 “ took 6.7 s)
_QUOTED = re.compile(r"《[^》]{0,200}》|“[^”]{0,200}”|「[^」]{0,200}」|\"[^\"]{0,200}\"|(?<!\w)'[^']{0,200}'(?!\w)")
_PATH_LIKE = re.compile(r"\.\w+|/")


def _unquoted(match: re.Match[str]) -> str:
    return match.group(0) if _PATH_LIKE.search(match.group(0)) else " "


# something to be done by a day: a deadline ("by Friday", "before the end of the month", "周五之前",
# "月底前") said with what must be done ("I have to", "得", "要"), not asked about; "Will it rain
# before Friday?" says nothing to be done
_DAY = (r"(?:today|tonight|tomorrow|noon|midnight|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
        r"the weekend|next \w+|this \w+|the end of|end of|january|february|march|april|may|june|july|august|"
        r"september|october|november|december|\d)")
_DUE = re.compile(rf"\b(?:by|before|until|till|no later than|due|sometime)\s+(?:the\s+)?{_DAY}|"
                  r"(?:今天|明天|后天|今晚|明晚|周[一二三四五六日天末]|星期[一二三四五六日天]|礼拜[一二三四五六日天]|下周|下礼拜|"
                  r"下星期|月底|月初|年底|年前|[\d一二三四五六七八九十]+[号日])(?:之前|以前|前)")
_MUST = re.compile(r"\b(?:have to|has to|need to|needs to|must|gotta|got to|should)\b|[要得须该]")
# ... unless it asks what is due: "What do I have to finish by Friday?" lists the todos
_ASKED = re.compile(r"^\W*(?:what|which|anything|is there|are there|do i|have i|how many)\b|哪些|什么|有没有|吗\W*$")


# A two-character Chinese word split by what a verb and its object take between them: an aspect
# word, a measure word, "big" or "a bit" (下了雨, 下大雨, 下场雨, 带把伞, 带上伞, 刮大风, 出个门)
_HAN_PAIR = re.compile(r"[\u3400-\u9fff]{2}")
_INFIX = "[了过个把场大小点一上着阵几]{0,2}"


def _plural_bases(word: str) -> set[str]:
    """What a plural may be the plural of: "branches" of "branch", "entries" of "entry"."""
    return {base for base in (word[:-1], word[:-2] if word.endswith("es") else "",
                              word[:-3] + "y" if word.endswith("ies") else "") if len(base) >= 3}


# a cue this long is also found as typed with one slip ("wether", "comits", "priorty", "detials"),
# in a word as long: "short" is no slip of "shorts"
_TYPO_CHARS = 6


def _word_forms(text: str) -> set[str]:
    return {form for word in _CUE_WORD.findall(text) for form in _forms(word)}


def _masked(text: str, phrases: Sequence[str]) -> str:
    """``text`` with each of ``phrases`` (a word or phrase as such; Chinese anywhere) blanked out."""
    for phrase in phrases:
        if _HAN.search(phrase):
            text = text.replace(phrase, " ")
        else:
            text = re.sub(rf"(?<![\w-]){re.escape(phrase)}(?![\w-])", " ", text)
    return text


def _forms(word: str) -> set[str]:
    """``word`` and the words it may be a form of: a plural ("files", "boxes", "entries"), an
    "-ing" or "-ed" form ("snowing", "buying", "stopped", "served"), each base of three letters
    or more. Some are no word ("morne" from "morning"); a cue is a word, so they find nothing."""
    out = {word}
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        out.add(word[:-1])
        if word.endswith("es"):
            out.add(word[:-2])
        if word.endswith("ies"):
            out.add(word[:-3] + "y")
    for suffix in ("ing", "ed"):
        base = word[:-len(suffix)]
        if word.endswith(suffix) and len(base) >= 3:
            out.update((base, base + "e"))
            if suffix == "ed" and base.endswith("i"):  # "carried": "carry"
                out.add(base[:-1] + "y")
            if base[-1] == base[-2] and base[-1] not in "aeiouls":  # "stopped": "stop"
                out.add(base[:-1])
    return out


# a question that only changes a detail of the one before: "And in Paris?", "What about
# tomorrow?", "那上海呢？" (not one about the assistant: "and you?", "你呢？")
_FOLLOW_UP = re.compile(r"^\W*(and|what about|how about)\b|呢\W*$", re.IGNORECASE)
_ABOUT_YOU = re.compile(r"\byou\b|你", re.IGNORECASE)
_FOLLOW_UP_CHARS = 60




def followed(request: RouteRequest) -> tuple[str, ...]:
    """The tools the turn before called, when the question is a short follow-up of it that
    names no tool's words; else none. Free to answer "And in Paris?" after a weather question,
    the 1.5B model wrote "The tool results say that Paris has a temperature of 17 degrees"
    without a call."""
    question = request.question
    if (len(question) > _FOLLOW_UP_CHARS or not _FOLLOW_UP.search(question) or _ABOUT_YOU.search(question)):
        return ()
    offered = {t["name"] for t in request.tools}
    return tuple(name for name in request.called_before if name in offered)
