"""Days as people say them (``tools.days``): found in a question word for word, and turned into
dates where a tool needs one (the weather)."""

from __future__ import annotations

from datetime import date

import pytest

from tools.days import day_of, days_said
from tools.weather import make_weather_tool

WEDNESDAY = date(2026, 12, 2)


@pytest.mark.parametrize(("question", "days"), [
    ("Remind me to call the bank tomorrow", ["tomorrow"]),
    ("提醒我周五前把季度报表交上去。", ["周五"]),
    ("Pay rent by Friday, or next Monday at the latest", ["Friday", "next Monday"]),
    ("下周三之前把合同寄出去，最晚下个月", ["下周三", "下个月"]),
    ("周末和星期天都行，或者 2026-12-24", ["周末", "星期天", "2026-12-24"]),
    ("The report is due the day after tomorrow", ["the day after tomorrow"]),
    ("明天或者后天，大后天也行", ["明天", "后天", "大后天"]),
    ("Add 'fix the bike'", []),
    ("What's the date of today's weekly meeting?", ["today"]),
    ("Renew the passport by March 3rd, or May 5 at the latest", ["March 3rd", "May 5"]),
    ("The rent is due on the 1st of June; remind me in 3 days", ["1st of June", "in 3 days"]),
    ("You may have 5 minutes", []),
])
def test_the_days_a_question_names(question: str, days: list[str]) -> None:
    assert days_said(question) == days


@pytest.mark.parametrize(("said", "day"), [
    ("today", "2026-12-02"), ("Tonight", "2026-12-02"), ("明天", "2026-12-03"), ("后天", "2026-12-04"),
    ("大后天", "2026-12-05"), ("the day after tomorrow", "2026-12-04"),
    ("Friday", "2026-12-04"), ("周五", "2026-12-04"), ("星期三", "2026-12-02"), ("周一", "2026-12-07"),
    ("next Friday", "2026-12-11"), ("下周三", "2026-12-09"), ("下下周一", "2026-12-14"), ("this weekend", "2026-12-05"),
    ("周末", "2026-12-05"), ("礼拜天", "2026-12-06"), ("in 3 days", "2026-12-05"), ("in a week", "2026-12-09"),
    ("March 3rd", "2027-03-03"), ("24th of December", "2026-12-24"), ("12月24日", "2026-12-24"),
    ("2026-12-24", "2026-12-24"),
])
def test_a_day_said_is_a_date(said: str, day: str) -> None:
    """"提醒我周五前…" on Wednesday 2026-12-02: the 0.5B model had written 2026-12-05."""
    assert day_of(said, WEDNESDAY) == date.fromisoformat(day)


@pytest.mark.parametrize("said", ["next week", "下个月", "月底", "February 30th", "someday"])
def test_a_span_or_no_day_is_no_date(said: str) -> None:
    assert day_of(said, WEDNESDAY) is None


def test_every_day_said_that_is_one_day_is_a_date() -> None:
    said = days_said("today, tonight, tomorrow, Friday, next Monday, this weekend, in 2 days, May 5, 周五, 下周三, "
                     "星期天, 明天, 后天, 大后天, 3月8日")
    assert len(said) == 15 and all(day_of(each, WEDNESDAY) is not None for each in said)


def test_the_weather_for_a_day_said_as_a_weekday() -> None:
    """Offered only the words the question says, the small model asks for "周五" or "Friday":
    the weather tool answers for that date instead of refusing it."""
    weather = make_weather_tool("sample")
    friday = weather.fn(city="Beijing", date="Friday")
    assert date.fromisoformat(friday["date"]).weekday() == 4
    assert weather.fn(city="北京", date="周五")["date"] == friday["date"]
    assert weather.fn(city="Beijing", date="明天")["date"] == "明天"
