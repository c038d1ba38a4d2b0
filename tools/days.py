"""Days as people say them, in English and Chinese: found in a text (``days_said``) and turned
into a date (``day_of``).

A tool argument for a day holds the day as the user said it ("周五", "next Monday"): the small
local model is offered only those words for it (``repl.providers.grammar``), because it computed
dates, and wrongly (a Saturday for 周五). Code turns them into dates where a tool needs one (the
weather). "next Friday" and 下周五 are the Friday of next week; a bare weekday is the next one
from today on (today itself included).
"""

from __future__ import annotations

import re
from datetime import date as Date
from datetime import timedelta

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("jan(?:uary)?", "feb(?:ruary)?", "mar(?:ch)?", "apr(?:il)?", "may", "june?", "july?", "aug(?:ust)?",
           "sep(?:t(?:ember)?)?", "oct(?:ober)?", "nov(?:ember)?", "dec(?:ember)?")
_WEEKDAY, _MONTH = "|".join(_WEEKDAYS), "|".join(_MONTHS)
_HAN_DAY = "一二三四五六日天"  # Monday .. Sunday (日 and 天 both Sunday)
_COUNT = {"a": 1, "one": 1, "two": 2, "three": 3}
# the days a text may name, each as a whole: longer forms before those they hold
_DAYS = re.compile(
    rf"\b(?:the day after tomorrow|today|tonight|tomorrow|(?:this |next )?(?:{_WEEKDAY}|weekend)"
    rf"|(?:this|next) (?:week|month)|end of (?:the )?(?:day|week|month)|in (?:\d+|a|one|two|three) (?:days?|weeks?)"
    rf"|(?:{_MONTH})\.? \d{{1,2}}(?:st|nd|rd|th)?|\d{{1,2}}(?:st|nd|rd|th)? (?:of )?(?:{_MONTH}))\b"
    r"|\b\d{4}-\d{2}-\d{2}\b"
    rf"|大后天|今天|今晚|明天|明晚|后天|(?:下下|下|这|本)?(?:周|星期|礼拜)[{_HAN_DAY}末]"
    r"|(?:下|这|本)(?:周|星期|个月)|月底|年底|\d{1,2}月\d{1,2}[日号]",
    re.IGNORECASE)
_AHEAD = {"today": 0, "tonight": 0, "今天": 0, "今晚": 0, "tomorrow": 1, "明天": 1, "明晚": 1,
          "the day after tomorrow": 2, "后天": 2, "大后天": 3}


def days_said(text: str) -> list[str]:
    """The days ``text`` names, as it writes them, each once: "tomorrow", "next Monday",
    "March 3rd", "2026-12-24", "周五", "下个月"."""
    return list(dict.fromkeys(match.group() for match in _DAYS.finditer(text)))


def day_of(said: str, today: Date) -> Date | None:
    """The date a day said as ``days_said`` finds it means, seen from ``today``; None for a
    span ("next week", "下个月", "月底") or anything else."""
    text = " ".join(said.casefold().split())
    if text in _AHEAD:
        return today + timedelta(days=_AHEAD[text])
    try:
        return Date.fromisoformat(text)
    except ValueError:
        pass
    if match := re.fullmatch(r"in (\d+|a|one|two|three) (day|week)s?", text):
        count = int(match[1]) if match[1].isdigit() else _COUNT[match[1]]
        return today + timedelta(days=count * (7 if match[2] == "week" else 1))
    if match := re.fullmatch(rf"(this |next )?({_WEEKDAY}|weekend)", text):
        weekday = 5 if match[2] == "weekend" else _WEEKDAYS.index(match[2])
        return _weekday(today, weekday, next_week=match[1] == "next ")
    if match := re.fullmatch(rf"(下下|下|这|本)?(?:周|星期|礼拜)([{_HAN_DAY}末])", text):
        weekday = 5 if match[2] == "末" else min(_HAN_DAY.index(match[2]), 6)
        if match[1] in ("下", "下下"):
            return _weekday(today, weekday, next_week=True) + timedelta(days=7 if match[1] == "下下" else 0)
        return _weekday(today, weekday, next_week=False)
    if match := (re.fullmatch(rf"({_MONTH})\.? (\d{{1,2}})(?:st|nd|rd|th)?", text)
                 or re.fullmatch(rf"(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?({_MONTH})", text)):
        month_word, day = (match[1], match[2]) if not match[1][0].isdigit() else (match[2], match[1])
        month = next(n for n, pattern in enumerate(_MONTHS, 1) if re.fullmatch(pattern, month_word))
        return _this_or_next_year(today, month, int(day))
    if match := re.fullmatch(r"(\d{1,2})月(\d{1,2})[日号]", text):
        return _this_or_next_year(today, int(match[1]), int(match[2]))
    return None


def _weekday(today: Date, weekday: int, *, next_week: bool) -> Date:
    """The ``weekday`` (0 Monday) from today on; with ``next_week``, the one of the week after
    this (weeks begin on Monday)."""
    if next_week:
        return today + timedelta(days=7 - today.weekday() + weekday)
    return today + timedelta(days=(weekday - today.weekday()) % 7)


def _this_or_next_year(today: Date, month: int, day: int) -> Date | None:
    try:
        this = Date(today.year, month, day)
        return this if this >= today else Date(today.year + 1, month, day)
    except ValueError:  # "February 30th"
        return None
