"""Values a question names for a tool's string property, read from the property's own text.

A tool's author often lists the values a property takes in its description, as examples of an
open set ('e.g. "road", "gravel", "mountain"; Chinese names such as "山地车" also work'); a time
zone property says it takes IANA names. Asked for a mountain bike's tyres ("山地车要打几个气压"),
the 0.5B model passed "roadcar"; asked the time in Tokyo, "UTC". When the question says one of
those values (a word as a whole word, in either number or typed with one slip; Chinese
anywhere; a zone by its city, "new york" or "纽约" for "America/New_York"), the property must have it:
the grammar offers that value alone (``grammar._mentioned_only``).
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

# a value a description quotes: 'road', "山地车", `main`; a list of them ["recipe", "work"]
# (a single quote beside a letter is an apostrophe: "the user's")
_QUOTED = re.compile(r"""(?<!\w)'([^'\n]{1,40})'(?!\w)|"([^"\n]{1,40})"|`([^`\n]{1,40})`|“([^”\n]{1,40})”""")
_IANA = re.compile(r"\bIANA\b")
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[^\W_]+")
# a word this long is also found typed with one slip ("gravle", "Vancover")
_SLIP_CHARS = 6


def one_slip(cue: str, word: str) -> bool:
    """``word`` is ``cue`` with one letter missing or added, or two side by side swapped. Not one
    letter for another: that is often another word ("ruining", "raining")."""
    if word == cue or abs(len(word) - len(cue)) > 1 or word[0] != cue[0]:
        return False
    if len(word) == len(cue):
        diff = [i for i, (a, b) in enumerate(zip(word, cue, strict=True)) if a != b]
        return (len(diff) == 2 and diff[1] == diff[0] + 1
                and word[diff[0]] == cue[diff[1]] and word[diff[1]] == cue[diff[0]])
    short, long = sorted((word, cue), key=len)
    i = next((i for i, (a, b) in enumerate(zip(short, long, strict=False)) if a != b), len(short))
    return short[i:] == long[i + 1:]


def _same_word(value: str, word: str) -> bool:
    """``word`` of a question is ``value``'s word: as written, in the other number ("kid",
    "kids"), or, six letters or more, with one slip."""
    if value == word or value.rstrip("s") == word.rstrip("s"):
        return True
    return len(value) >= _SLIP_CHARS and one_slip(value, word)


def says(question: str, value: str) -> bool:
    """``question`` says ``value``: Chinese anywhere; else its words in a row, each as a whole
    word (``_same_word``; "lower_back" as "lower back")."""
    if _HAN.search(value):
        return value in question
    wanted = _WORD.findall(value.casefold())
    words = _WORD.findall(question.casefold())
    if not wanted:
        return False
    return any(all(_same_word(w, words[i + k]) for k, w in enumerate(wanted))
               for i in range(len(words) - len(wanted) + 1))


@lru_cache(maxsize=1)
def _zones() -> list[tuple[str, str]]:
    """Each IANA zone with what a person calls it: its city ("America/New_York", "new york";
    "Japan", "japan"); by the Unicode locale data (CLDR, read with ``babel``, installed with the
    embedded model), its city in Chinese ("America/New_York", "纽约") and the name of a country
    all of whose zones keep one time ("Europe/Berlin", "Germany", "德国"; not the United States).
    Empty where the system has no zone database; its English cities only without ``babel``."""
    try:
        names = zoneinfo.available_timezones()
    except (OSError, ValueError):
        return []
    zones = sorted(name for name in names if not name.startswith(("Etc/", "SystemV/", "posix/", "right/")))
    return [(zone, _city(zone)) for zone in zones] + [pair for pair in _locale_names() if pair[0] in names]


def _locale_names() -> list[tuple[str, str]]:
    try:
        from babel import Locale
        from babel.core import get_global

        chinese, english = Locale.parse("zh"), Locale.parse("en")
        cities = [(zone, city) for zone, names in chinese.time_zones.items()
                  if isinstance(city := names.get("city"), str) and _HAN.search(city)]
        countries = [(zones[0], name) for code, zones in get_global("territory_zones").items()
                     if zones and _one_time(zones)
                     for name in (english.territories.get(code), chinese.territories.get(code)) if name]
    except Exception:  # noqa: BLE001 - missing or unreadable locale data: the zones' own names only
        return []
    return cities + countries


def _one_time(zones: Sequence[str]) -> bool:
    """The zones keep one time all year: the same offsets from UTC in January and in July."""
    from datetime import datetime

    try:
        offsets = {tuple(datetime(2026, month, 1, 12, tzinfo=zoneinfo.ZoneInfo(zone)).utcoffset() for month in (1, 7))
                   for zone in zones}
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return len(offsets) == 1


def _city(zone: str) -> str:
    return zone.rsplit("/", 1)[-1].replace("_", " ")


def candidates(schema: Any) -> list[tuple[str, str]]:
    """The values a string property's description gives (quoted), and every IANA zone when it
    takes one, each with the words a question says it by (a zone: in English and in Chinese)."""
    if not isinstance(schema, dict) or any(key in schema for key in ("enum", "const", "format")):
        return []
    types = schema.get("type")
    if "string" not in (types if isinstance(types, list) else [types]):
        return []
    description = str(schema.get("description") or "")
    found = [(value, value) for match in _QUOTED.finditer(description)
             if (value := next(group for group in match.groups() if group is not None).strip())]
    if _IANA.search(description):
        found += _zones()
    return found


def named(schema: Any, question: str) -> list[str]:
    """The values of ``schema``'s candidates ``question`` says, none inside a longer one said
    ("山地" in "山地车"), one per way of saying it (a quoted "Europe/London" and the zone itself)."""
    said: dict[str, str] = {}
    for value, words in candidates(schema):
        if says(question, words):
            said.setdefault(words.casefold(), value)
    return list(dict.fromkeys(value for key, value in said.items()
                              if not any(key != other and key in other for other in said)))


def shared_named(properties: Sequence[tuple[str, Any]], question: str) -> dict[str, list[str]]:
    """Each of ``properties`` (name, schema) the question names values for, with those values,
    when it names as many of them as there are properties naming the same ones: one value said
    for one zone property, two cities for a conversion's source and target ("noon in Sydney
    is when in Berlin?"). Otherwise it says nothing definite and the property is left free:
    one city for a conversion (the other end may be the user's own zone), or more values than
    properties, unless those it says in capitals are as many ("Tokyo" and "London", not
    "wake", an island's zone)."""
    found = {name: sorted(named(schema, question)) for name, schema in properties}  # sorted: compared as sets
    kept: dict[str, list[str]] = {}
    for name, values in found.items():
        if not values:
            continue
        alike = sum(1 for other in found.values() if other == values)
        if len(values) > alike:
            values = [v for v in values if _capitalised(question, v)]
        if len(values) == alike:
            kept[name] = values
    return kept


def _capitalised(question: str, value: str) -> bool:
    """``question`` names ``value``'s zone as a name (its city or country): in capitals, or in Chinese."""
    return any(zone == value and (words[:1].isupper() or _HAN.search(words)) and words in question
               for zone, words in _zones())
