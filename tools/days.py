"""Days as people say them, in English and Chinese: found in a text (``days_said``) and turned
into a date, with the time of day when one was said (``when_of``; ``day_of`` for the date).

A tool argument for a day holds the day as the user said it ("周五", "next Monday", "tomorrow at
3pm"): the small local model is offered only those words for it (``repl.embedded.grammar``),
because it computed dates, and wrongly (a Saturday for 周五). Code turns them into dates where a
tool needs one (a todo's due date, the weather's day).

``dateparser`` reads them (imported on first use: it is no part of start-up). A thin layer
before it rewrites what it misreads or does not read: a weekday is the next one from today on
(today itself included) and "next Friday" or 下周五 is the Friday of next week (dateparser reads
"next Friday" as the coming one); Chinese times (下午三点半), counts in Chinese numerals (两天后),
下周三 and 12月24日; "before"/之前 around a day. A span ("next week", "下个月", "月底") is no day.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date as Date
from datetime import datetime, timedelta
from datetime import time as Time
from typing import Any

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("jan(?:uary)?", "feb(?:ruary)?", "mar(?:ch)?", "apr(?:il)?", "may", "june?", "july?",
           "aug(?:ust)?", "sep(?:t(?:ember)?)?", "oct(?:ober)?", "nov(?:ember)?", "dec(?:ember)?")
_WEEKDAY, _MONTH = "|".join(_WEEKDAYS), "|".join(_MONTHS)
_HAN_DAY = "一二三四五六日天"  # Monday .. Sunday (日 and 天 both Sunday)
_HAN_DIGITS = "零一二三四五六七八九"
_HAN_NUMBER = "[一二两三四五六七八九]?十[一二三四五六七八九]?|[零〇一二两三四五六七八九]"
_NUMBER = rf"[0-9]{{1,2}}|{_HAN_NUMBER}"  # 0 to 99
_PART_OF_DAY = "凌晨|早上|早晨|上午|中午|下午|傍晚|晚上|夜里"
_EN_DAY = (rf"the day after tomorrow|today|tonight|tomorrow|(?:this |next )?(?:{_WEEKDAY}|weekend)"
           r"|(?:this|next) (?:week|month)|end of (?:the )?(?:day|week|month)"
           r"|in (?:\d+|a|one|two|three) (?:days?|weeks?)"
           rf"|(?:{_MONTH})\.? \d{{1,2}}(?:st|nd|rd|th)?"
           rf"|\d{{1,2}}(?:st|nd|rd|th)? (?:of )?(?:{_MONTH})")
_EN_TIME = r"\d{1,2}(?::\d{2})? ?[ap]m|\d{1,2}:\d{2}|noon|midnight"
_ZH_DAY = (rf"大后天|今天|今晚|明天|明晚|后天|(?:下下|下|这|本)?(?:周|星期|礼拜)[{_HAN_DAY}末]"
           r"|(?:下|这|本)(?:周|星期|个月)|月底|年底|\d{1,2}月\d{1,2}[日号]")
_ZH_TIME = (rf"(?P<part>{_PART_OF_DAY})?(?P<hour>{_NUMBER})"  # 下午三点半, 晚上8:15, 十点一刻, 9点20分
            rf"(?:[点點时時](?:(?P<quarter>半|[一三]刻)|(?P<minute>{_NUMBER})分?)?|:(?P<mm>[0-9]{{2}}))")
# the days a text may name, each as a whole with the time said with it: longer forms first
_DAYS = re.compile(
    rf"\b(?:(?:{_EN_TIME}),? (?:on )?)?(?:{_EN_DAY})(?:,? (?:at |by )?(?:{_EN_TIME}))?\b"
    r"|\b\d{4}-\d{2}-\d{2}(?: \d{2}:\d{2})?\b"
    rf"|(?:{_ZH_DAY})(?:{_ZH_TIME})?",
    re.IGNORECASE)
_SPAN = re.compile(r"\b(?:(?:this|next) (?:week|month)|end of (?:the )?(?:week|month|year))\b"
                   r"|(?:下|这|本)(?:周|星期|个?月)(?![一二三四五六日天末])|这个月|月底|年底",
                   re.IGNORECASE)
# 之前, 以前, 前 after a day ("周五前": by Friday), not after a count ("3天前": three days ago)
_BEFORE_ZH = re.compile(r"(?<![0-9零〇一二两三四五六七八九十几][天日周月年])(?<!小时)(?<!分钟)(?<!个月)(?:之|以)?前$")
# a time of day in what was said: unless it is read as one, the text is not understood
_A_TIME = re.compile(rf"\b(?:{_EN_TIME})\b|\bat \d{{1,2}}\b|{_ZH_TIME}", re.IGNORECASE)
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}"
                  r"(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?")


@dataclass(frozen=True)
class When:
    """A day, and the time of day when one was said."""

    day: Date
    time: Time | None = None

    def iso(self) -> str:
        """``YYYY-MM-DD``, or ``YYYY-MM-DD HH:MM`` with a time."""
        return f"{self.day.isoformat()} {self.time:%H:%M}" if self.time else self.day.isoformat()


def days_said(text: str) -> list[str]:
    """The days ``text`` names, as it writes them, each once, with the time said with each:
    "tomorrow", "tomorrow at 3pm", "next Monday", "March 3rd", "2026-12-24", "周五",
    "明天上午十点", "下个月"."""
    return list(dict.fromkeys(match.group() for match in _DAYS.finditer(text)))


def is_span(said: str) -> bool:
    """Whether ``said`` names a span of days ("next week", "下个月", "月底"), not one day."""
    return bool(_SPAN.search(said))


def day_of(said: str, today: Date) -> Date | None:
    """The date a day said means, seen from ``today``; None for a span or anything else."""
    when = when_of(said, datetime.combine(today, Time()))
    return when.day if when else None


def when_of(said: str, now: datetime) -> When | None:
    """The day (and the time, when one was said) ``said`` means, seen from ``now`` (naive, local
    time); None for a span or what cannot be read as one day. An ISO date is taken as it is."""
    text = " ".join(said.split())
    if not text or is_span(text):
        return None
    if _ISO.fullmatch(text):
        return _iso(text)
    when = _parsed(_rewritten(text, now.date()), now)
    return None if when and when.time is None and _A_TIME.search(text) else when  # "tomorrow at 3"


def _iso(text: str) -> When | None:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:  # "2026-02-30"
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone().replace(tzinfo=None)
    return When(moment.date(), _minute(moment) if len(text) > 10 else None)


def _parsed(text: str, now: datetime) -> When | None:
    from dateparser.date import DateDataParser  # type: ignore[import-untyped]  # no stubs

    settings: dict[str, Any] = {"PREFER_DATES_FROM": "future", "RELATIVE_BASE": now,
                                "RETURN_AS_TIMEZONE_AWARE": True, "RETURN_TIME_AS_PERIOD": True}
    found = DateDataParser(languages=["en", "zh"], settings=settings).get_date_data(text)
    if found.date_obj is None or found.period not in ("day", "time", "part_of_day", "week"):
        return None  # "Friday at 3" was read as a month
    moment = found.date_obj.astimezone().replace(tzinfo=None)
    if moment.date() == _a_year_on(now.date()) and str(moment.year) not in text:
        moment = moment.replace(year=now.year)  # today's date said today: its midnight is past
    return When(moment.date(), _minute(moment) if found.period == "time" else None)


def _minute(moment: datetime) -> Time:
    return moment.time().replace(second=0, microsecond=0)


def _a_year_on(day: Date) -> Date | None:
    try:
        return day.replace(year=day.year + 1)
    except ValueError:  # 29 February
        return None


def _rewritten(text: str, today: Date) -> str:
    """``text`` in words dateparser reads as the project means them (see the module's doc)."""
    text = re.sub(r"^(?:by|before|no later than|until|till) ", "", text, flags=re.IGNORECASE)
    text = _BEFORE_ZH.sub("", text)
    text = text.replace("今晚", "今天晚上").replace("明晚", "明天晚上")
    text = text.replace("今年", f"{today.year}年").replace("明年", f"{today.year + 1}年")
    text = re.sub(_ZH_TIME, _clock, text)
    text = re.sub(rf"{_PART_OF_DAY}", " ", text)  # a part of the day without a time: the day only
    text = re.sub(rf"({_HAN_NUMBER})(?=[月日号天周个])", lambda m: str(_han_number(m[1])), text)
    text = re.sub(r"(\d{1,2}月\d{1,2})[日号]", r"\1", text)
    text = re.sub(rf"\b(?:(this|next) )?({_WEEKDAY}|weekend)\b",
                  lambda m: _weekday_said(today, m[2].casefold(), m[1]), text, flags=re.IGNORECASE)
    text = re.sub(rf"(下下|下|这|本)?(?:周|星期|礼拜)([{_HAN_DAY}末])",
                  lambda m: _weekday_said(today, m[2], m[1]), text)
    return " ".join(text.split())


def _weekday_said(today: Date, day: str, which: str | None) -> str:
    """The ISO date of a weekday said ("friday", "weekend", "五", "末") after ``which`` ("next",
    "this", 下下, 下, 这, 本 or None)."""
    if day in ("weekend", "末"):
        weekday = 5
    elif day in _HAN_DAY:
        weekday = min(_HAN_DAY.index(day), 6)
    else:
        weekday = _WEEKDAYS.index(day)
    weeks = {"next": 1, "下": 1, "下下": 2}.get((which or "").casefold(), 0)
    if weeks:
        found = today + timedelta(days=7 - today.weekday() + weekday + 7 * (weeks - 1))
    else:
        found = today + timedelta(days=(weekday - today.weekday()) % 7)
    return f" {found.isoformat()} "


def _clock(said: re.Match[str]) -> str:
    """A Chinese time (``_ZH_TIME``: "下午三点半", "晚上8:15") as " HH:MM " on a 24-hour clock;
    one past the clock ("25点") as it was said, which dateparser then does not read."""
    part, hour = said["part"] or "", _han_number(said["hour"])
    minute = {"半": 30, "一刻": 15, "三刻": 45}.get(said["quarter"] or "", 0)
    if said["minute"] or said["mm"]:
        minute = _han_number(said["minute"] or said["mm"])
    if (part in ("下午", "傍晚", "晚上", "夜里") and hour < 12) or (part == "中午" and hour < 11):
        hour += 12
    elif part == "凌晨" and hour == 12:
        hour = 0
    return f" {hour:02d}:{minute:02d} " if hour < 24 and minute < 60 else said[0]


def _han_number(said: str) -> int:
    """0 to 99 written in digits or in Chinese numerals ("三", "十二", "二十四", "两")."""
    if said.isdigit():
        return int(said)
    said = said.replace("两", "二").replace("〇", "零")
    tens, ten, ones = said.partition("十")
    if not ten:
        return _HAN_DIGITS.index(said)
    return (_HAN_DIGITS.index(tens) if tens else 1) * 10 + (_HAN_DIGITS.index(ones) if ones else 0)
