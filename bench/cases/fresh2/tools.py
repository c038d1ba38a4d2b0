"""The second held-out set's own tools: a library catalogue and a public-holiday table.

Both are fixed tables (no network, no clock), so a call gives the same result every run.
"""

from __future__ import annotations

from dataclasses import dataclass

from glassloop_tools import ToolError, tool


@dataclass(frozen=True)
class Book:
    titles: tuple[str, ...]  # the original title, then a translation's
    author: str
    year: int
    shelf: str
    copies: int
    on_loan: int


_BOOKS: tuple[Book, ...] = (
    Book(("The Three-Body Problem", "三体"), "Liu Cixin (刘慈欣)", 2008, "SF-12", 3, 3),
    Book(("Norwegian Wood", "挪威的森林"), "Haruki Murakami (村上春树)", 1987, "FIC-40", 2, 1),
    Book(("Kafka on the Shore", "海边的卡夫卡"), "Haruki Murakami (村上春树)", 2002, "FIC-41", 1, 0),
    Book(("The Hobbit", "霍比特人"), "J. R. R. Tolkien", 1937, "FAN-03", 2, 2),
    Book(("Dune", "沙丘"), "Frank Herbert", 1965, "SF-07", 2, 0),
    Book(("To Live", "活着"), "Yu Hua (余华)", 1993, "CN-22", 4, 1),
    Book(("Fortress Besieged", "围城"), "Qian Zhongshu (钱钟书)", 1947, "CN-05", 1, 1),
    Book(("Pride and Prejudice", "傲慢与偏见"), "Jane Austen", 1813, "CLS-02", 2, 0),
    Book(("Sapiens", "人类简史"), "Yuval Noah Harari", 2011, "HIS-18", 3, 2),
    Book(("The Little Prince", "小王子"), "Antoine de Saint-Exupéry", 1943, "CHI-01", 5, 1),
    Book(("Clean Code", "代码整洁之道"), "Robert C. Martin", 2008, "CS-31", 1, 0),
)


def _summary(book: Book) -> dict[str, object]:
    return {"title": " / ".join(book.titles), "author": book.author, "year": book.year,
            "shelf": book.shelf, "copies": book.copies, "available": book.copies - book.on_loan}


@tool
def find_book(query: str, available_only: bool = False) -> dict:
    """Look up books in the library catalogue by title or author.

    Returns each matching book with its author, year, shelf and how many copies are
    on the shelf now.

    Args:
        query: part of a title or of an author's name
        available_only: only books with at least one copy on the shelf
    """
    needle = query.strip().casefold()
    if not needle:
        raise ToolError("invalid_query", "query is empty: give part of a title or an author")
    found = [_summary(book) for book in _BOOKS
             if any(needle in text.casefold() for text in (*book.titles, book.author))
             and (not available_only or book.copies > book.on_loan)]
    return {"query": query, "count": len(found), "books": found}


_HOLIDAYS: dict[str, list[tuple[str, str]]] = {
    "CN": [("2026-01-01", "New Year's Day"), ("2026-02-17", "Spring Festival"),
           ("2026-04-05", "Qingming Festival"), ("2026-05-01", "Labour Day"),
           ("2026-06-19", "Dragon Boat Festival"), ("2026-09-25", "Mid-Autumn Festival"),
           ("2026-10-01", "National Day")],
    "JP": [("2026-01-01", "New Year's Day"), ("2026-01-12", "Coming of Age Day"),
           ("2026-02-11", "National Foundation Day"), ("2026-02-23", "Emperor's Birthday"),
           ("2026-03-20", "Vernal Equinox Day"), ("2026-04-29", "Showa Day"),
           ("2026-05-03", "Constitution Memorial Day"), ("2026-05-04", "Greenery Day"),
           ("2026-05-05", "Children's Day"), ("2026-05-06", "Substitute holiday"),
           ("2026-07-20", "Marine Day"), ("2026-08-11", "Mountain Day"),
           ("2026-09-21", "Respect for the Aged Day"), ("2026-09-22", "Citizens' holiday"),
           ("2026-09-23", "Autumnal Equinox Day"), ("2026-10-12", "Sports Day"),
           ("2026-11-03", "Culture Day"), ("2026-11-23", "Labour Thanksgiving Day")],
    "GB": [("2026-01-01", "New Year's Day"), ("2026-04-03", "Good Friday"),
           ("2026-04-06", "Easter Monday"), ("2026-05-04", "Early May bank holiday"),
           ("2026-05-25", "Spring bank holiday"), ("2026-08-31", "Summer bank holiday"),
           ("2026-12-25", "Christmas Day"), ("2026-12-28", "Boxing Day (substitute day)")],
    "US": [("2026-01-01", "New Year's Day"), ("2026-01-19", "Martin Luther King Jr. Day"),
           ("2026-02-16", "Washington's Birthday"), ("2026-05-25", "Memorial Day"),
           ("2026-06-19", "Juneteenth"), ("2026-07-03", "Independence Day (observed)"),
           ("2026-09-07", "Labor Day"), ("2026-10-12", "Columbus Day"),
           ("2026-11-11", "Veterans Day"), ("2026-11-26", "Thanksgiving Day"),
           ("2026-12-25", "Christmas Day")],
    "DE": [("2026-01-01", "New Year's Day"), ("2026-04-03", "Good Friday"),
           ("2026-04-06", "Easter Monday"), ("2026-05-01", "Labour Day"),
           ("2026-05-14", "Ascension Day"), ("2026-05-25", "Whit Monday"),
           ("2026-10-03", "Day of German Unity"), ("2026-12-25", "Christmas Day"),
           ("2026-12-26", "Second day of Christmas")],
    "FR": [("2026-01-01", "New Year's Day"), ("2026-04-06", "Easter Monday"),
           ("2026-05-01", "Labour Day"), ("2026-05-08", "Victory in Europe Day"),
           ("2026-05-14", "Ascension Day"), ("2026-05-25", "Whit Monday"),
           ("2026-07-14", "Bastille Day"), ("2026-08-15", "Assumption of Mary"),
           ("2026-11-01", "All Saints' Day"), ("2026-11-11", "Armistice Day"),
           ("2026-12-25", "Christmas Day")],
}

_COUNTRY_NAMES: dict[str, str] = {
    "cn": "CN", "china": "CN", "prc": "CN", "中国": "CN",
    "jp": "JP", "japan": "JP", "日本": "JP",
    "gb": "GB", "uk": "GB", "united kingdom": "GB", "britain": "GB", "great britain": "GB",
    "england": "GB", "英国": "GB",
    "us": "US", "usa": "US", "united states": "US", "united states of america": "US",
    "america": "US", "美国": "US",
    "de": "DE", "germany": "DE", "deutschland": "DE", "德国": "DE",
    "fr": "FR", "france": "FR", "法国": "FR",
}


@tool
def public_holidays(country: str, year: int = 2026, month: int | None = None) -> dict:
    """List the public holidays of a country.

    Covers China, Japan, the United Kingdom, the United States, Germany and France
    (national holidays only, not regional ones).

    Args:
        country: country name or two-letter code, e.g. "Japan" or "JP"
        year: the year (only 2026 is in the table)
        month: only holidays in this month (1-12); the whole year when left out
    """
    code = _COUNTRY_NAMES.get(country.strip().casefold())
    if code is None:
        known = "China, Japan, United Kingdom, United States, Germany, France"
        raise ToolError("unknown_country", f"no holiday table for {country!r}: known are {known}")
    if year != 2026:
        raise ToolError("unknown_year", f"no holiday table for {year}: only 2026")
    if month is not None and not 1 <= month <= 12:
        raise ToolError("invalid_month", f"month must be 1-12, got {month}")
    days = [{"date": day, "name": name} for day, name in _HOLIDAYS[code]
            if month is None or int(day[5:7]) == month]
    return {"country": code, "year": year, "month": month, "count": len(days), "holidays": days}
