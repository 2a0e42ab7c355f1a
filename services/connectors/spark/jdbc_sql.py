"""The SQL of ``mode=jdbc``, as pure functions: cursors, literals, probes and the
partitions of a read.

A **cursor** is the list of columns a mode reads in order — ``[id]`` (incrementing),
``[updated_at]`` (timestamp), ``[updated_at, id]`` (timestamp+incrementing) — and a
position on it is the cursor's values of the last row delivered (the source offset).
Rows *after* a position are those whose cursor tuple is greater
(:func:`after`: ``updated_at > t OR (updated_at = t AND id > i)``).

Every value written into SQL comes from an offset, which a user may alter over REST,
so :func:`literal` re-formats each value from its parsed form (an ``int``, a decimal
number, a date or timestamp) and never copies text through: nothing but a number or
a quoted date/time literal reaches the database.

Column kinds (:data:`KINDS`): ``integer`` (integral types and decimals without
fraction), ``timestamp`` (without time zone: a wall-clock value, compared as it is),
``timestamptz`` (an instant, written with its UTC offset) and ``date``.
"""

from __future__ import annotations

import datetime
import decimal
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

KINDS = ("integer", "timestamp", "timestamptz", "date")
_DECIMAL = re.compile(r"-?\d+")
_UTC = datetime.UTC


class BadValue(ValueError):
    """A cursor value that is not of its column's kind (an offset altered by hand?)."""


@dataclass(frozen=True)
class CursorColumn:
    name: str
    kind: str  # one of KINDS
    quoted: str  # the name quoted for the database


def parse_datetime(text: str) -> datetime.datetime:
    """A date/time value from its ISO-8601 text or a database's text (``2024-02-29
    12:00:00.123456+00``); more than 6 fractional digits are cut to microseconds."""
    cleaned = re.sub(r"(\.\d{6})\d+", r"\1", str(text).strip())
    try:
        return datetime.datetime.fromisoformat(cleaned)
    except ValueError:
        raise BadValue(f"not a date/time: {text!r}") from None


def _timestamp_text(value: datetime.datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S.%f")


def literal(value: Any, kind: str) -> str:
    """``value`` (an offset's JSON value or a database's text) as an SQL literal of ``kind``."""
    if kind == "integer":
        if isinstance(value, bool):
            raise BadValue(f"not an integer: {value!r}")
        text = str(value).strip()
        if isinstance(value, float) or not _DECIMAL.fullmatch(text):
            raise BadValue(f"not an integer: {value!r}")
        return str(int(decimal.Decimal(text)))
    if kind == "date":
        return f"'{parse_datetime(str(value)).date().isoformat()}'"
    moment = parse_datetime(str(value))
    if kind == "timestamp":
        return f"'{_timestamp_text(moment.replace(tzinfo=None))}'"
    if kind == "timestamptz":
        if moment.tzinfo is None:
            raise BadValue(f"a timestamp with time zone needs an offset: {value!r}")
        return f"'{_timestamp_text(moment.astimezone(_UTC))}+00:00'"
    raise ValueError(f"unknown column kind {kind!r}")


def sort_key(value: Any, kind: str) -> Any:
    """A value of ``kind`` as something Python orders as the database does."""
    if kind == "integer":
        return int(decimal.Decimal(str(value)))
    moment = parse_datetime(str(value))
    if kind == "timestamptz":
        return moment.astimezone(_UTC)
    return moment.replace(tzinfo=None)


def not_null(cursor: Sequence[CursorColumn]) -> str:
    return " AND ".join(f"{c.quoted} IS NOT NULL" for c in cursor)


def after(cursor: Sequence[CursorColumn], values: Sequence[Any] | None) -> str:
    """The rows whose cursor tuple is greater than ``values`` (every row with a cursor
    when there is no position yet). Two columns: ``a >= x AND (a > x OR b > y)`` — the
    leading ``a >= x`` lets the database scan an index on ``(a, b)`` from ``x`` on
    instead of OR-ing two scans (``b > y`` alone may match most of the table)."""
    if values is None:
        return not_null(cursor)
    if len(values) != len(cursor):
        raise BadValue(f"a position of {len(cursor)} values expected, got {list(values)}")
    first = cursor[0]
    low = literal(values[0], first.kind)
    if len(cursor) == 1:
        return f"{first.quoted} > {low}"
    terms = [f"{first.quoted} > {low}"]
    for n in range(1, len(cursor)):
        equal = [f"{cursor[i].quoted} = {literal(values[i], cursor[i].kind)}" for i in range(1, n)]
        greater = f"{cursor[n].quoted} > {literal(values[n], cursor[n].kind)}"
        terms.append(" AND ".join([*equal, greater]))
    return f"{first.quoted} >= {low} AND ({' OR '.join(terms)})"


def before(column: CursorColumn, limit: str | None) -> str:
    """The rows whose ``column`` is below ``limit`` (a literal); always true without one."""
    return "" if limit is None else f"{column.quoted} < {limit}"


def conjunction(*terms: str) -> str:
    present = [t for t in terms if t]
    if not present:
        return ""
    return " AND ".join(f"({t})" for t in present)


def now_expression(product: str, kind: str) -> str:
    """The database's clock as a value of ``kind`` (for ``timestamp.delay.interval.ms``)."""
    name = product.lower()
    if "sql server" in name:
        return "SYSDATETIMEOFFSET()" if kind == "timestamptz" else "SYSDATETIME()"
    if kind == "timestamptz":
        return "CURRENT_TIMESTAMP"
    if "mysql" in name or "mariadb" in name:
        return "LOCALTIMESTAMP(6)"
    if "postgres" in name:
        return "LOCALTIMESTAMP"
    return "CURRENT_TIMESTAMP"


def probe_sql(source: str, column: CursorColumn, where: str, now: str | None) -> str:
    """Rows after the position, their least and greatest ``column`` value, and the
    database's clock when ``now`` is given (one short statement; with an index on the
    cursor columns a range scan, an index-only lookup on an idle table)."""
    clock = f", {now}" if now else ""
    condition = f" WHERE {where}" if where else ""
    return (
        f"SELECT COUNT(*), MIN({column.quoted}), MAX({column.quoted}){clock} "
        f"FROM {source}{condition}"
    )


def delay_limit(now_text: str, delay_ms: int, kind: str) -> str:
    """The literal below which rows are old enough: the database's clock minus the delay."""
    moment = parse_datetime(now_text) - datetime.timedelta(milliseconds=delay_ms)
    if kind == "timestamptz" and moment.tzinfo is None:
        moment = moment.replace(tzinfo=_UTC)
    return literal(moment.isoformat(), kind)


def boundaries(kind: str, low: str, high: str, pieces: int) -> list[str]:
    """Up to ``pieces - 1`` literals splitting [``low``, ``high``] evenly (as the
    database's texts of a column's least and greatest value), increasing; none when
    the values cannot be split."""
    if pieces <= 1:
        return []
    try:
        if kind == "integer":
            lo, hi = int(decimal.Decimal(low)), int(decimal.Decimal(high))
            points: list[Any] = sorted({lo + (hi - lo + 1) * i // pieces for i in range(1, pieces)})
            return [literal(p, kind) for p in points if lo < p <= hi]
        first, last = parse_datetime(low), parse_datetime(high)
        if (first.tzinfo is None) != (last.tzinfo is None):
            return []
        span = last - first
        moments = sorted({first + span * i / pieces for i in range(1, pieces)})
        return [literal(m.isoformat(), kind) for m in moments if first < m <= last]
    except (BadValue, ValueError, decimal.InvalidOperation):
        return []


def stripes(column: CursorColumn, points: Sequence[str]) -> list[str]:
    """One predicate per partition of a read, in ``column`` order: below the first
    point, between each two, from the last on. Every row with a value is in exactly one."""
    if not points:
        return [""]
    q = column.quoted
    out = [f"{q} < {points[0]}"]
    out += [f"{q} >= {a} AND {q} < {b}" for a, b in itertools.pairwise(points)]
    out.append(f"{q} >= {points[-1]}")
    return out


def quote(parts: Sequence[str], quote_string: str) -> str:
    """An identifier from its parts (``["public", "orders"]``), each quoted with the
    database's quote string (doubled inside a part)."""
    q = quote_string.strip()
    if not q:
        return ".".join(parts)
    return ".".join(q + part.replace(q, q + q) + q for part in parts)


def query_source(query: str) -> str:
    """A user's query as a table expression."""
    return f"({query.strip().rstrip(';')}) eos_query"
