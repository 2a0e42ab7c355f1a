"""``java.text.SimpleDateFormat`` patterns (``yyyyMMdd``, ``yyyy-MM-dd'T'HH:mm:ss.SSSZ``)
as Kafka Connect uses them in TimestampRouter and TimestampConverter: always in UTC,
English names (Java's default ``en_US`` locale), lenient parsing.

Letters: ``G`` era, ``y`` year (``yy``: two digits), ``Y`` week year, ``M``/``L`` month
(``MMM`` Jan, ``MMMM`` January), ``w`` week in year, ``W`` week in month, ``D`` day in
year, ``d`` day in month, ``F`` day of week in month, ``E`` day name (``EEEE`` Monday),
``u`` day number (1 = Monday), ``a`` AM/PM, ``H`` hour 0-23, ``k`` 1-24, ``K`` 0-11,
``h`` 1-12, ``m`` minute, ``s`` second, ``S`` millisecond, ``z`` ``Z`` ``X`` time zone;
text in single quotes, ``''`` for a quote. Weeks start on Sunday; week 1 holds 1 January.
Parsing reads a prefix of the text (as ``DateFormat.parse`` does) and rolls values over
(month 13 is January of the next year).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from dataclasses import dataclass

UTC = datetime.UTC
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)
_LETTERS = "GyYMLwWDdFEuaHkKhmsSzZX"
_NUMERIC = set("yYwWDdFuHkKhmsS")
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


@dataclass(frozen=True)
class _Field:
    letter: str
    count: int


class SimpleDateFormat:
    """A compiled pattern: :meth:`format` and :meth:`parse` in UTC."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._parts = _compile(pattern)
        self._parser: re.Pattern[str] | None = None

    def format_millis(self, millis: int) -> str:
        """The text of epoch milliseconds ``millis``."""
        return self.format(EPOCH + datetime.timedelta(milliseconds=millis))

    def format(self, moment: datetime.datetime) -> str:
        """The text of ``moment`` (naive means UTC)."""
        if moment.tzinfo is not None:
            moment = moment.astimezone(UTC)
        return "".join(p if isinstance(p, str) else _format(p, moment) for p in self._parts)

    def parse(self, text: str) -> datetime.datetime:
        """The UTC moment ``text`` (or a prefix of it) describes; ValueError if none."""
        if self._parser is None:
            self._parser = re.compile(_regex(self._parts), re.IGNORECASE)
        found = self._parser.match(text)
        if found is None:
            raise ValueError(f"{text!r} does not match the pattern {self.pattern!r}")
        fields = [p for p in self._parts if isinstance(p, _Field)]
        return _moment(zip(fields, found.groups(), strict=True))


def _compile(pattern: str) -> list[str | _Field]:
    parts: list[str | _Field] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            end, literal = i + 1, []
            while True:
                if end >= n:
                    raise ValueError(f"unterminated quote in {pattern!r}")
                if pattern[end] == "'":
                    if end + 1 < n and pattern[end + 1] == "'":
                        literal.append("'")
                        end += 2
                        continue
                    break
                literal.append(pattern[end])
                end += 1
            parts.append("".join(literal) if end > i + 1 else "'")
            i = end + 1
        elif c.isascii() and c.isalpha():
            if c not in _LETTERS:
                raise ValueError(f"illegal pattern character {c!r} in {pattern!r}")
            j = i
            while j < n and pattern[j] == c:
                j += 1
            parts.append(_Field(c, j - i))
            i = j
        else:
            parts.append(c)
            i += 1
    return parts


def _week_one(year: int) -> datetime.date:
    """The Sunday that starts week 1 of ``year`` (the week holding 1 January)."""
    first = datetime.date(year, 1, 1)
    return first - datetime.timedelta(days=(first.weekday() + 1) % 7)


def _week_year(day: datetime.date) -> tuple[int, int]:
    year = day.year + 1 if day >= _week_one(day.year + 1) else day.year
    return year, (day - _week_one(year)).days // 7 + 1


def _number(value: int, count: int) -> str:
    return str(value).zfill(count)


def _format(f: _Field, t: datetime.datetime) -> str:
    c, n = f.letter, f.count
    if c in "yY":
        year = t.year if c == "y" else _week_year(t.date())[0]
        return _number(year % 100, 2) if n == 2 else _number(year, n)
    if c in "ML":
        return _MONTHS[t.month - 1][: None if n >= 4 else 3] if n >= 3 else _number(t.month, n)
    if c == "E":
        return _DAYS[t.weekday()][: None if n >= 4 else 3]
    if c == "a":
        return "AM" if t.hour < 12 else "PM"
    if c == "G":
        return "AD"
    if c == "z":
        return "Coordinated Universal Time" if n >= 4 else "UTC"
    if c == "Z":
        return "+0000"
    if c == "X":
        return "Z"
    return _number(_numeric(c, t), n)


def _numeric(c: str, t: datetime.datetime) -> int:
    day = t.date()
    values = {
        "d": t.day,
        "D": day.timetuple().tm_yday,
        "F": (t.day - 1) // 7 + 1,
        "u": t.isoweekday(),
        "H": t.hour,
        "k": t.hour or 24,
        "K": t.hour % 12,
        "h": t.hour % 12 or 12,
        "m": t.minute,
        "s": t.second,
        "S": t.microsecond // 1000,
    }
    if c in values:
        return values[c]
    if c == "w":
        return _week_year(day)[1]
    first = day.replace(day=1)  # W: weeks of the month start on Sunday too
    return (t.day - 1 + (first.weekday() + 1) % 7) // 7 + 1


_ZONE = r"(Z|[+-]\d{2}(?::?\d{2})?|(?:UTC|GMT)(?:[+-]\d{1,2}(?::?\d{2})?)?)"


def _is_number(part: str | _Field | None) -> bool:
    return isinstance(part, _Field) and (
        part.letter in _NUMERIC or (part.letter in "ML" and part.count < 3)
    )


def _regex(parts: list[str | _Field]) -> str:
    """A regex with one group per field; a number followed by another number (``yyyyMMdd``)
    takes exactly as many digits as its letter is repeated."""
    out = []
    for i, p in enumerate(parts):
        if isinstance(p, str):
            out.append(re.escape(p))
        elif _is_number(p):
            abutting = _is_number(parts[i + 1] if i + 1 < len(parts) else None)
            out.append(rf"(\d{{{p.count}}})" if abutting else r"([+-]?\d+)")
        elif p.letter in "zZX":
            out.append(_ZONE)
        else:  # month and day names, AM/PM, era
            out.append(r"([A-Za-z]+)")
    return "".join(out)


def _moment(found: Iterable[tuple[_Field, str]]) -> datetime.datetime:
    v = {"y": 1970, "M": 1, "d": 1, "H": 0, "m": 0, "s": 0, "S": 0, "pm": 0, "h12": -1}
    offset = 0
    for f, text in found:
        c = f.letter
        if c in "ML" and f.count >= 3:
            v["M"] = _name_index(text, _MONTHS) + 1
        elif c in "zZX":
            offset = _offset_minutes(text)
        elif c == "a":
            v["pm"] = 1 if text.upper() == "PM" else 0
        elif c in "yY":
            v["y"] = _two_digit_year(text) if f.count == 2 and len(text) == 2 else int(text)
        elif c in "ML":
            v["M"] = int(text)
        elif c in "Hk":
            v["H"] = int(text) % 24
        elif c in "hK":
            v["h12"] = int(text) % 12
        elif c in "dmsS":
            v[c] = int(text)
        elif c == "D":
            v["M"], v["d"] = 1, int(text)
    hour = v["h12"] + 12 * v["pm"] if v["h12"] >= 0 else v["H"]
    year, month = v["y"] + (v["M"] - 1) // 12, (v["M"] - 1) % 12 + 1
    moment = datetime.datetime(year, month, 1, tzinfo=UTC)
    return moment + datetime.timedelta(
        days=v["d"] - 1,
        hours=hour,
        minutes=v["m"] - offset,
        seconds=v["s"],
        milliseconds=v["S"],
    )


def _name_index(text: str, names: list[str]) -> int:
    for i, name in enumerate(names):
        if text.lower() in (name.lower(), name[:3].lower()):
            return i
    raise ValueError(f"{text!r} is not a month name")


def _offset_minutes(text: str) -> int:
    digits = text.upper().removeprefix("UTC").removeprefix("GMT")
    if digits in ("", "Z"):
        return 0
    sign = -1 if digits[0] == "-" else 1
    hours, _, minutes = digits[1:].partition(":")
    if not minutes and len(hours) > 2:
        hours, minutes = hours[:-2], hours[-2:]
    return sign * (int(hours) * 60 + int(minutes or 0))


def _two_digit_year(text: str) -> int:
    """Java's rule: the year within 80 years before and 20 after today."""
    now = datetime.datetime.now(UTC).year
    year = now - now % 100 + int(text)
    return year - 100 if year > now + 20 else year
